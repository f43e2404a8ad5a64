"""Method comparison (Table 2 style) and system comparison (Figures 2-3 style) on real runs
replayed from cassettes."""

from __future__ import annotations

import json

import pytest

from judge.cli import main
from judge.errors import DataMismatchError

from ..conftest import CASSETTES, EXAMPLES
from ..conftest import replayed_example_run as _run


def test_methods_table_on_the_same_turns(tmp_path, capsys):
    two_dim = _run(tmp_path, "two-dim", "example-two-dim.json")
    direct = _run(tmp_path, "direct", "example-direct.json", "--method", "direct")
    labels = tmp_path / "human.jsonl"
    labels.write_text("".join(json.dumps({"dialogue_id": d, "turn_index": t, "label": 1}) + "\n"
                              for d, t in (("EX001.json", 0), ("EX002.json", 0))))
    capsys.readouterr()
    out_json = tmp_path / "methods.json"
    assert main(["compare", str(two_dim), str(direct), "--human", str(labels),
                 "--json", str(out_json)]) == 0
    table = json.loads(out_json.read_text())
    assert [m["method"] for m in table["methods"]] == ["two-dim", "direct"]
    assert table["turns"] == 11
    for method, run in zip(table["methods"], (two_dim, direct), strict=True):
        summary = json.loads((run / "summary.json").read_text())
        assert method["tsa"] == summary["tsa"]
        assert method["agreement"]["2.4"] == summary["rule"]["2.4"]["agreement"]
        assert method["agreement"]["human"] is not None
        assert method["calls"] == summary["calls"]["planned"]
    assert "Judge methods on the same 11 turns" in capsys.readouterr().out


def test_methods_on_different_turns_are_refused(tmp_path):
    from judge import load_run
    from judge.analysis import method_table

    full = _run(tmp_path, "full", "example-two-dim.json")
    part = _run(tmp_path, "part", "example-two-dim.json", "--limit", "1")
    with pytest.raises(DataMismatchError, match="different turns"):
        method_table([load_run(full), load_run(part)])


def test_systems_table_json_and_png(tmp_path):
    strong = _run(tmp_path, "strong", "example-two-dim.json")
    weak = _run(tmp_path, "weak", "example-weak-two-dim.json",
                predictions="predictions-weak.jsonl")
    png, out_json = tmp_path / "systems.png", tmp_path / "systems.json"
    assert main(["systems", str(strong), str(weak), "--schema", str(EXAMPLES / "schema.json"),
                 "--json", str(out_json), "--png", str(png)]) == 0
    table = json.loads(out_json.read_text())
    assert [s["system"] for s in table["systems"]] == ["example-dst", "weaker-dst"]
    for system, run in zip(table["systems"], (strong, weak), strict=True):
        summary = json.loads((run / "summary.json").read_text())
        assert system["tsa"]["judge"] == summary["tsa"]
        assert system["jga"]["judge"] == summary["judge_jga"]
        assert set(system["jga"]) == {"judge", "RULE-2.1", "RULE-2.4"}
    # exact-match JGA agrees with the metrics command (data README-style check)
    assert table["systems"][0]["jga"]["RULE-2.1"] == pytest.approx(100 * 5 / 11)
    assert table["systems"][1]["jga"]["RULE-2.1"] == pytest.approx(100 * 2 / 11)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_systems_uses_the_recorded_schema_and_its_legend_covers_no_bar(tmp_path):
    from judge.analysis import systems_figure

    strong = _run(tmp_path, "strong", "example-two-dim.json")
    weak = _run(tmp_path, "weak", "example-weak-two-dim.json",
                predictions="predictions-weak.jsonl")
    out_json = tmp_path / "systems.json"
    # no --schema: the runs recorded the schema's absolute path and digest
    assert main(["systems", str(strong), str(weak), "--json", str(out_json)]) == 0
    table = json.loads(out_json.read_text())
    figure = systems_figure(table)
    renderer = figure.canvas.get_renderer()
    legend = figure.legends[0].get_window_extent(renderer)
    for axis in figure.axes:
        for patch in axis.patches:
            assert not legend.overlaps(patch.get_window_extent(renderer))


def test_systems_refuses_a_changed_recorded_schema(tmp_path, capsys):
    import shutil

    schema = tmp_path / "schema.json"
    shutil.copy(EXAMPLES / "schema.json", schema)
    out = tmp_path / "run"
    assert main(["evaluate", "--schema", str(schema),
                 "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                 "--predictions", str(EXAMPLES / "predictions.jsonl"), "--model", "local",
                 "--replay", str(CASSETTES / "example-two-dim.json"),
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0
    schema.write_text(schema.read_text() + "\n")
    capsys.readouterr()
    assert main(["systems", str(out)]) == 2
    assert "--schema" in capsys.readouterr().err


def test_compare_fits_80_columns_with_whole_names_and_kappa_intervals(tmp_path):
    from rich.console import Console

    from judge import load_run
    from judge.analysis import method_table
    from judge.cli._report import print_methods

    two_dim = _run(tmp_path, "two-dim", "example-two-dim.json")
    few_shot = _run(tmp_path, "few", "example-two-dim-few-shot.json",
                    "--prompt-variant", "few-shot", "--semantics", "paper")
    table = method_table([load_run(two_dim), load_run(few_shot)])
    kappa = table["methods"][0]["kappa"]["2.1"]
    assert kappa["value"] is not None and len(kappa["ci"]) == 2
    assert kappa["ci"][0] <= kappa["value"] <= kappa["ci"][1]
    console = Console(width=80, record=True, color_system=None)
    print_methods(table, console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "two-dim (few-shot) [paper]" in text  # the longest name, not cut
    assert f"{kappa['value']:.2f} [{kappa['ci'][0]:.2f},{kappa['ci'][1]:.2f}]" in text


def test_systems_shows_the_corrected_gold_beside_the_original(tmp_path):
    strong = _run(tmp_path, "strong", "example-two-dim.json")
    corrections = tmp_path / "corrections.jsonl"
    # one real fix (2.4 has the hotel's name from turn 2) and one "the annotation is right"
    corrections.write_text("".join(json.dumps(record) + "\n" for record in (
        {"dialogue_id": "EX001.json", "turn_index": 2, "slot": "hotel-name",
         "value": "worth house", "gold": "2.1", "reviewer": "ann",
         "time": "2026-11-28T10:00:00Z"},
        {"dialogue_id": "EX001.json", "turn_index": 0, "slot": "hotel-area", "value": "north",
         "gold": "2.1", "reviewer": "ann", "time": "2026-11-28T10:01:00Z"})))
    out_json, png = tmp_path / "systems.json", tmp_path / "systems.png"
    assert main(["systems", str(strong), "--schema", str(EXAMPLES / "schema.json"),
                 "--corrections", str(corrections), "--json", str(out_json),
                 "--png", str(png)]) == 0
    system = json.loads(out_json.read_text())["systems"][0]
    corrected = [k for k in system["jga"] if k.startswith("RULE-2.1+corr:")]
    assert len(corrected) == 1 and corrected[0] in system["tsa"]
    metrics_json = tmp_path / "metrics.json"
    assert main(["metrics", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions",
                 str(EXAMPLES / "predictions.jsonl"), "--gold", "2.1", "--corrections",
                 str(corrections), "--json", str(metrics_json)]) == 0
    metrics = json.loads(metrics_json.read_text())["systems"][0]["metrics"]
    assert system["jga"][corrected[0]] == pytest.approx(metrics["jga"])
    assert system["jga"]["RULE-2.1"] == pytest.approx(100 * 5 / 11)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
