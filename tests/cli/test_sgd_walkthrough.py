"""The README's new-domain walkthrough, step by step: native SGD files (two made-up services)
converted, validated, estimated, judged from a cassette recorded on the local model, and
scored under the sgd profile."""

from __future__ import annotations

import json
from pathlib import Path

from judge.cli import main

from ..conftest import CASSETTES, require_cassette

FORMATS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def test_sgd_walkthrough_end_to_end(tmp_path, capsys, monkeypatch):
    require_cassette("sgd-two-dim.json")
    monkeypatch.chdir(tmp_path)
    assert main(["convert", str(FORMATS / "sgd_schema.json"), "--out", "schema.json"]) == 0
    assert main(["convert", str(FORMATS / "sgd_dialogues.json"), "--schema", "schema.json",
                 "--out", "dialogues.jsonl"]) == 0
    assert main(["convert", str(FORMATS / "sgd_predictions.json"), "--kind", "predictions",
                 "--schema", "schema.json", "--dialogues", "dialogues.jsonl",
                 "--system-name", "my-tracker", "--out", "predictions.jsonl"]) == 0
    assert main(["validate", "schema", "schema.json"]) == 0
    assert main(["validate", "dialogues", "dialogues.jsonl"]) == 0
    data = ["--schema", "schema.json", "--dialogues", "dialogues.jsonl",
            "--predictions", "predictions.jsonl"]
    assert main(["evaluate", "--dry-run", *data, "--model", "local"]) == 0
    capsys.readouterr()
    code = main(["evaluate", *data, "--model", "local", "--no-cache",
                 "--replay", str(CASSETTES / "sgd-two-dim.json"), "--out", "runs/sgd"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "runs/sgd/summary.json").read_text(encoding="utf-8"))
    assert summary["error_turns"] == 0
    assert summary["calls"]["planned"] == 10
    rows = [json.loads(line) for line in
            (tmp_path / "runs/sgd/judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["dialogue_id"] for r in rows} and all(r["verdict"] is not None for r in rows)
    assert main(["report", *data, "--profile", "sgd"]) == 0
