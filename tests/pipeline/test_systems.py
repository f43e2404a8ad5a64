"""Several systems judged together: each distinct request is sent once, and each system's
results are those of a separate run (issue 13, deliverable 3)."""

from __future__ import annotations

import json

from judge import evaluate, load_config, load_predictions
from judge.cli import main
from judge.pipeline import evaluate_systems

from ..conftest import EXAMPLES
from ..fault_server import FaultConfig, FaultServer


def _systems(tmp_path, dialogues, schema):
    """The example system, a renamed copy of it (every request shared) and the weaker one."""
    copy = tmp_path / "inputs" / "copy.jsonl"
    copy.parent.mkdir()
    copy.write_text((EXAMPLES / "predictions.jsonl").read_text()
                    .replace('"example-dst"', '"example-copy"'))
    paths = [EXAMPLES / "predictions.jsonl", copy, EXAMPLES / "predictions-weak.jsonl"]
    return [load_predictions(p, dialogues, schema) for p in paths]


def _comparable(row):
    """A judgments row without what depends on who paid (cache flags, counts)."""
    calls = [{k: v for k, v in call.items() if k != "attempts"} | {
        "replies": [a["text"] for a in call["attempts"]]} for call in row["calls"]]
    return {**row, "calls": calls}


def test_systems_together_pay_each_request_once_with_the_results_of_separate_runs(
        tmp_path, example_data):
    schema, dialogues, _ = example_data
    systems = _systems(tmp_path, dialogues, schema)
    faults = FaultConfig(rates={"invalid_once": 0.3, "refusal": 0.05}, seed=3)
    with FaultServer(faults) as server:
        config = load_config({"model": "m", "base_url": server.url, "use_cache": False,
                              "cache_dir": str(tmp_path / "cache")})
        separate = [evaluate(config, schema, dialogues, s, out_dir=tmp_path / f"alone{n}")
                    for n, s in enumerate(systems)]
        paid_separately = server.snapshot()["completed"]
        server.stats.reset()
        together = evaluate_systems(config, schema, dialogues, systems,
                                    out_dir=tmp_path / "together")
        stats = server.snapshot()
    assert stats["completed"] == stats["distinct_bodies"]  # each distinct request once
    assert paid_separately == sum(len(c["attempts"]) for r in separate for row in r.rows
                                  for c in row["calls"])
    assert stats["completed"] < paid_separately * 2 / 3  # the copy cost nothing
    for alone, joint in zip(separate, together, strict=True):
        assert [_comparable(r) for r in joint.rows] == [_comparable(r) for r in alone.rows]
        for key in ("tsa", "judge_jga", "rule", "turns", "scored_turns", "error_turns"):
            assert joint.summary[key] == alone.summary[key]
    copy = together[1].summary["calls"]
    assert copy["sent"] == 0 and copy["cache_hits"] > 0  # the copy paid for nothing
    assert sum(r.summary["calls"]["sent"] for r in together) == stats["completed"]
    names = sorted(p.name for p in (tmp_path / "together").iterdir() if p.is_dir())
    assert names == ["example-copy", "example-dst", "weaker-dst"]
    for name in names:
        manifest = json.loads((tmp_path / "together" / name / "manifest.json").read_text())
        assert manifest["kind"] == "evaluate"


def test_cli_takes_a_directory_and_the_dry_run_reports_the_saving(tmp_path, capsys):
    folder = tmp_path / "systems"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.jsonl").write_text((EXAMPLES / "predictions.jsonl").read_text()
                                              .replace('"example-dst"', f'"system-{name}"'))
    data = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
            str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(folder), "--model", "m",
            "--no-cache", "--no-progress"]
    assert main(["evaluate", *data, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 systems (system-a, system-b): 44 calls, 22 distinct requests" in out
    assert "saving 50.0%" in out
    with FaultServer(FaultConfig()) as server:
        assert main(["evaluate", *data, "--base-url", server.url, "--out",
                     str(tmp_path / "runs")]) == 0
        assert server.snapshot()["completed"] == 22
    assert "2 systems, 44 calls planned: 22 requests sent" in capsys.readouterr().out
    for name in ("system-a", "system-b"):
        assert json.loads((tmp_path / "runs" / name / "summary.json").read_text())["turns"] == 11
