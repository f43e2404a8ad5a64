"""``dst-judge leaderboard`` end to end: predictions files, judge runs and both mixed; every
output format; bad input (exit 2, a clear message, no traceback); whole at 80 columns."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from judge import MetricOptions, compute_metrics, load_dialogues, load_predictions, load_schema
from judge.cli import main

from ..conftest import CASSETTES, EXAMPLES, require_cassette

SCHEMA, DIALOGUES = EXAMPLES / "schema.json", EXAMPLES / "dialogues.jsonl"
STRONG, WEAK = EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl"
DATA = ["--schema", str(SCHEMA), "--dialogues", str(DIALOGUES)]
TURNS = 11  # the examples' four dialogues


def _evaluate(folder, predictions, cassette):
    require_cassette(cassette)
    out = folder / f"run-{predictions.stem}"
    assert main(["evaluate", *DATA, "--predictions", str(predictions), "--model", "local",
                 "--replay", str(CASSETTES / cassette), "--cache-dir", str(folder / "c"),
                 "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaderboard")
    return (_evaluate(folder, STRONG, "example-two-dim.json"),
            _evaluate(folder, WEAK, "example-weak-two-dim.json"))


def _board(tmp_path, capsys, *args):
    out = tmp_path / "board.json"
    code = main(["leaderboard", *args, "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads(out.read_text()), printed


def test_predictions_files_figures_intervals_and_pairs(tmp_path, capsys):
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--gold", "2.1", "2.4")
    schema, dialogues = load_schema(SCHEMA), load_dialogues(DIALOGUES)
    assert [s["name"] for s in board["systems"]] == ["example-dst", "weaker-dst"]
    for system, path in zip(board["systems"], (STRONG, WEAK), strict=True):
        predictions = load_predictions(path, dialogues, schema)
        for version in ("2.1", "2.4"):
            suite = compute_metrics(dialogues, predictions, schema,
                                    MetricOptions(breakdowns=False), gold=version)
            figures = suite.systems[0].metrics
            for key, expected in (("jga", figures["jga"]), ("sa", figures["sa"]),
                                  ("fga", figures["fga"]["0.5"]),
                                  ("gca", figures["gca"]["gca"])):
                found = system["metrics"][f"{key}@{version}"]
                assert found["value"] == pytest.approx(expected, abs=1e-9)
                low, high = found["ci"]
                assert low <= found["value"] <= high
        assert set(system["metrics"]) == {f"{m}@{v}" for m in ("jga", "sa", "fga", "gca")
                                          for v in ("2.1", "2.4")}
        assert system["rank_ci"][0] <= system["rank"] <= system["rank_ci"][1]
    assert len(board["pairs"]) == 8  # one pair, eight metrics
    pair = board["pairs"][0]
    assert set(pair) >= {"a", "b", "metric", "difference", "ci", "p", "p_adjusted",
                         "significant"}
    assert pair["difference"] >= 0
    strong, weak = (s["metrics"][pair["metric"]]["value"] for s in board["systems"]
                    if s["name"] in (pair["a"], pair["b"]))
    assert pair["difference"] == pytest.approx(abs(strong - weak), abs=1e-9)
    assert board["method"]["correction"] == "holm"
    assert "CR1" in board["method"]["interval"] and board["method"]["dialogues"] == 4
    dimensions = {b["dimension"] for b in board["breakdowns"]}
    assert dimensions == {"position", "length", "domain"}


def test_judge_runs_add_tsa_and_judge_jga_mixed_with_a_predictions_file(
        runs, tmp_path, capsys):
    strong_run, weak_run = runs
    board, _ = _board(tmp_path, capsys, str(strong_run), str(weak_run), str(WEAK),
                      "--names", "strong", "weak", "weak-file")
    by_name = {s["name"]: s for s in board["systems"]}
    summary = json.loads((strong_run / "summary.json").read_text())
    assert by_name["strong"]["kind"] == "run"
    assert by_name["strong"]["metrics"]["tsa"]["value"] == pytest.approx(summary["tsa"])
    assert by_name["strong"]["metrics"]["judge_jga"]["value"] == pytest.approx(
        summary["judge_jga"])
    assert "tsa" not in by_name["weak-file"]["metrics"]  # a predictions file has no judge
    # the run of the weak predictions scores them exactly as the file does
    assert (by_name["weak"]["metrics"]["jga"]["value"]
            == by_name["weak-file"]["metrics"]["jga"]["value"])
    tsa_pairs = [p for p in board["pairs"] if p["metric"] == "tsa"]
    assert [{p["a"], p["b"]} for p in tsa_pairs] == [{"strong", "weak"}]
    assert len([p for p in board["pairs"] if p["metric"] == "jga"]) == 3


def test_every_output_format(tmp_path, capsys):
    out = {k: tmp_path / f"board.{k}" for k in ("csv", "md", "tex", "png", "svg", "jsonl")}
    board, printed = _board(
        tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--csv", str(out["csv"]),
        "--markdown", str(out["md"]), "--latex", str(out["tex"]), "--png", str(out["png"]),
        "--svg", str(out["svg"]), "--turns", str(out["jsonl"]))
    rows = list(csv.DictReader(io.StringIO(out["csv"].read_text())))
    jga = [r for r in rows if r["kind"] == "system" and r["metric"] == "jga"]
    assert {r["system"] for r in jga} == {"example-dst", "weaker-dst"}
    first = next(s for s in board["systems"] if s["name"] == jga[0]["system"])
    assert float(jga[0]["value"]) == pytest.approx(first["metrics"]["jga"]["value"])
    assert any(r["kind"] == "pair" for r in rows)
    assert any(r["kind"].startswith("breakdown:") for r in rows)
    markdown = out["md"].read_text()
    assert "| rank | system | JGA | SA | FGA | GCA |" in markdown
    assert "clustered by dialogue" in markdown and "Holm" in markdown
    latex = out["tex"].read_text()
    assert r"\toprule" in latex and r"\bottomrule" in latex and r"\caption{" in latex
    assert r"$\pm$" in latex
    assert out["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in out["svg"].read_bytes()[:500]
    records = [json.loads(line) for line in out["jsonl"].read_text().splitlines()]
    assert len(records) == 2 * TURNS
    assert set(records[0]) == {"system", "dialogue_id", "turn_index", "jga", "sa", "fga",
                               "gca_c", "gca_w", "gca_o", "gca_m"}
    mine = [r for r in records if r["system"] == "example-dst"]
    assert sum(r["jga"] for r in mine) / TURNS * 100 == pytest.approx(
        next(s for s in board["systems"] if s["name"] == "example-dst")["metrics"]["jga"][
            "value"])
    assert "wrote" in printed.out


def test_turns_as_parquet_hold_the_same_rows(runs, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    jsonl, parquet = tmp_path / "t.jsonl", tmp_path / "t.parquet"
    for path in (jsonl, parquet):
        assert main(["leaderboard", str(runs[0]), str(WEAK), "--names", "run", "file",
                     "--turns", str(path)]) == 0
    capsys.readouterr()
    table = pq.read_table(parquet).to_pylist()
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(table) == len(records) == 2 * TURNS
    for row, record in zip(table, records, strict=True):
        assert row == pytest.approx(record)
    assert any(r["tsa"] is not None for r in table if r["system"] == "run")
    assert all(r["tsa"] is None for r in table if r["system"] == "file")


def test_parquet_without_pyarrow_is_refused_clearly(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    code = main(["leaderboard", str(STRONG), str(WEAK), *DATA, "--turns",
                 str(tmp_path / "t.parquet")])
    err = capsys.readouterr().err
    assert code == 2
    assert "dst-judge[parquet]" in err and "Traceback" not in err


def test_seen_values_add_a_seen_unseen_breakdown(tmp_path, capsys):
    seen = tmp_path / "seen.txt"
    seen.write_text("north\ncheap\nyes\nguest house\n")
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--seen", str(seen))
    values = {b["group"]: b for b in board["breakdowns"] if b["dimension"] == "values"}
    assert set(values) == {"seen", "unseen"}
    assert values["seen"]["turns"] + values["unseen"]["turns"] == TURNS
    assert values["seen"]["turns"] >= 1  # EX001's first turn holds north and cheap only
    assert "seen.txt" in board["method"]["breakdowns"]


def test_by_correction_and_confidence_are_recorded(tmp_path, capsys):
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--correction", "by",
                      "--confidence", "0.9", "--no-breakdowns")
    assert board["method"]["correction"] == "by" and board["method"]["confidence"] == 0.9
    assert board["breakdowns"] == []


def test_corrections_add_a_corrected_gold(tmp_path, capsys):
    corrections = tmp_path / "corrections.jsonl"
    corrections.write_text(json.dumps(
        {"dialogue_id": "EX001.json", "turn_index": 2, "slot": "hotel-name",
         "value": "worth house", "gold": "2.1", "reviewer": "ann",
         "time": "2026-11-28T10:00:00Z"}) + "\n")
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--gold", "2.1",
                      "--corrections", str(corrections))
    keys = set(board["systems"][0]["metrics"])
    assert "jga@2.1" in keys and any(k.startswith("jga@2.1+corr:") for k in keys)


def test_whole_at_80_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    board, printed = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--gold", "2.1",
                            "2.4", "--names", "a-long-system-name-v2", "baseline")
    lines = printed.out.splitlines()
    assert max(len(line) for line in lines) <= 80, printed.out
    for system in board["systems"]:
        assert system["name"] in printed.out
        jga = system["metrics"]["jga@2.4"]
        half = (jga["ci"][1] - jga["ci"][0]) / 2
        assert f"{jga['value']:.2f} ± {half:.2f}" in printed.out


def _bad(capsys, *args):
    code = main(["leaderboard", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


def test_one_system_only_is_refused(capsys):
    assert "at least two" in _bad(capsys, str(STRONG), *DATA)


def test_duplicate_names_are_refused(capsys):
    err = _bad(capsys, str(STRONG), str(WEAK), *DATA, "--names", "same", "same")
    assert "'same'" in err
    # the same file twice: two systems of one name
    err = _bad(capsys, str(STRONG), str(STRONG), *DATA)
    assert "example-dst" in err and "--names" in err


def test_a_system_with_missing_dialogues_is_refused(tmp_path, capsys):
    short = tmp_path / "short.jsonl"
    short.write_text("".join(STRONG.read_text().splitlines(keepends=True)[:3]))
    err = _bad(capsys, str(STRONG), str(short), *DATA)
    assert "short.jsonl" in err and "missing" in err and "EX004" in err


def test_mismatched_turn_counts_are_refused(tmp_path, capsys):
    lines = STRONG.read_text().splitlines()
    record = json.loads(lines[0])
    record["turns"] = record["turns"][:-1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    err = _bad(capsys, str(STRONG), str(bad), *DATA)
    assert "bad.jsonl" in err and "turns" in err


def test_a_run_missing_turns_of_the_dialogues_is_refused(runs, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("EX001.json\nEX002.json\n")
    strong_run = runs[0]
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("summary.json", "manifest.json"):
        if (strong_run / name).exists():
            (partial / name).write_text((strong_run / name).read_text())
    rows = (strong_run / "judgments.jsonl").read_text().splitlines()
    (partial / "judgments.jsonl").write_text(
        "\n".join(r for r in rows if '"EX004' not in r) + "\n")
    err = _bad(capsys, str(strong_run), str(partial), "--names", "a", "b")
    assert "partial" in err and "missing turns of EX004" in err
    # narrowed to the dialogues it judged, it is accepted
    assert main(["leaderboard", str(strong_run), str(partial), "--names", "a", "b",
                 "--dialogue-ids", str(ids)]) == 0


def test_predictions_files_need_the_data_files(capsys):
    assert "--schema and --dialogues" in _bad(capsys, str(STRONG), str(WEAK))


def test_files_in_another_order_are_loaded_whole_with_the_same_figures(tmp_path, capsys):
    """Files in the dialogues' order are read in step, a dialogue at a time; a file in
    another order is loaded whole instead, and the figures are the same."""
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join(reversed(WEAK.read_text().splitlines())) + "\n")
    in_step, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA)
    whole, _ = _board(tmp_path, capsys, str(STRONG), str(shuffled), *DATA)
    assert in_step["method"]["reading"] == "in step, a dialogue at a time"
    assert whole["method"]["reading"] == "dialogues whole, one system at a time"
    for key in ("systems", "pairs", "breakdowns"):
        for found in (in_step, whole):
            for row in found[key]:
                row.pop("source", None)
        assert in_step[key] == whole[key]


def _labels(path, run):
    """Stand-in human labels of every turn of ``run``: its RULE verdict against 2.4."""
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    path.write_text("".join(json.dumps({
        "dialogue_id": r["dialogue_id"], "turn_index": r["turn_index"],
        "label": int(r["rule"]["2.4"]), "reviewer": "ana"}) + "\n" for r in rows))
    return path, rows


def test_human_labels_add_prediction_powered_tsa_as_compare_computes_it(runs, tmp_path,
                                                                         capsys):
    strong_run, weak_run = runs
    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(strong_run), "--design", "random", "--n", str(TURNS),
                 "--out", str(sample)]) == 0
    strong_labels, strong_rows = _labels(tmp_path / "strong.jsonl", strong_run)
    weak_labels, weak_rows = _labels(tmp_path / "weak.jsonl", weak_run)
    compared = tmp_path / "compare.json"
    assert main(["compare", str(strong_run), str(weak_run), "--sample", str(sample), "--human",
                 str(strong_labels), str(weak_labels), "--json", str(compared)]) == 0
    capsys.readouterr()
    board, printed = _board(tmp_path, capsys, str(strong_run), str(weak_run), str(WEAK),
                            "--names", "strong", "weak", "file", "--sample", str(sample),
                            "--human", str(strong_labels), str(weak_labels))
    labelled = board["labelled"]
    assert "prediction-powered" in labelled["method"]
    assert [s["name"] for s in labelled["systems"]] == ["strong", "weak"]
    # every turn labelled: a census, the PPI value is the labels' mean
    for system, rows in zip(labelled["systems"], (strong_rows, weak_rows), strict=True):
        expected = 100 * sum(r["rule"]["2.4"] for r in rows) / len(rows)
        assert system["tsa"]["value"] == pytest.approx(expected)
    (pair,) = labelled["pairs"]
    theirs = json.loads(compared.read_text())["differences"][0]["estimates"]["tsa"]["ppi"]
    assert pair["difference"] == pytest.approx(theirs["value"])
    assert pair["ci"] == pytest.approx(theirs["ci"])
    assert "Prediction-powered TSA" in printed.out


def test_human_labels_need_a_sample_and_a_run(runs, capsys):
    assert "go together" in _bad(capsys, str(runs[0]), str(WEAK), "--human", str(WEAK))
    err = _bad(capsys, str(STRONG), str(WEAK), *DATA, "--human", str(WEAK), "--sample",
               str(WEAK))
    assert "judge runs" in err


def test_seen_values_from_a_dialogues_file_or_a_json_list(tmp_path, capsys):
    """A training set of the same dialogues has seen every value: no unseen turns; a JSON
    list with one value leaves every turn holding another value unseen."""
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--seen", str(DIALOGUES))
    groups = {b["group"]: b["turns"] for b in board["breakdowns"]
              if b["dimension"] == "values" and b["metric"] == "jga"}
    assert groups == {"seen": TURNS}
    listed = tmp_path / "seen.json"
    listed.write_text(json.dumps(["north"]))
    board, _ = _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--seen", str(listed))
    groups = {b["group"]: b["turns"] for b in board["breakdowns"] if b["dimension"] == "values"}
    assert groups["unseen"] >= 10 and sum(groups.values()) == TURNS
    listed.write_text(json.dumps({"north": 1}))
    assert "list of values" in _bad(capsys, str(STRONG), str(WEAK), *DATA, "--seen",
                                    str(listed))


def test_names_are_escaped_in_latex_and_markdown(tmp_path, capsys):
    latex, markdown = tmp_path / "t.tex", tmp_path / "t.md"
    _board(tmp_path, capsys, str(STRONG), str(WEAK), *DATA, "--names", "sys_a 50%", "b|c",
           "--latex", str(latex), "--markdown", str(markdown))
    assert r"sys\_a 50\%" in latex.read_text()
    assert "sys_a 50%" not in latex.read_text()
    assert r"b\|c" in markdown.read_text()


def test_turns_with_another_suffix_is_refused_before_any_work(tmp_path, capsys):
    err = _bad(capsys, str(STRONG), str(WEAK), *DATA, "--turns", str(tmp_path / "t.csv"))
    assert ".jsonl (gzipped as .jsonl.gz) or .parquet" in err and not (tmp_path / "t.csv").exists()
