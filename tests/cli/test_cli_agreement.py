"""CLI surface of agreement, labels sample and audit: a replayed run end to end, and clear
errors (exit 2, file and field named, no traceback)."""

from __future__ import annotations

import csv
import json

import pytest

from judge.cli import main

from ..conftest import CASSETTES, EXAMPLES

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(EXAMPLES / "predictions.jsonl")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    out = folder / "run"
    assert main(["evaluate", *DATA, "--model", "local", "--replay",
                 str(CASSETTES / "example-two-dim.json"), "--cache-dir", str(folder / "c"),
                 "--out", str(out)]) == 0
    return out


def test_sample_label_and_population_estimates(run_dir, tmp_path, capsys):
    sample = tmp_path / "sample.jsonl"
    assert main(["labels", "sample", str(run_dir), "--n", "6", "--design", "judge-rule",
                 "--gold", "2.1", "--seed", "3", "--out", str(sample)]) == 0
    out = capsys.readouterr().out
    assert "Stratified sample of 6 turns from 11" in out
    drawn = [json.loads(line) for line in sample.read_text().splitlines()]
    assert len(drawn) == 6 and {d["gold"] for d in drawn} == {"2.1"}
    assert main(["validate", "sample", str(sample)]) == 0
    capsys.readouterr()
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({
        "dialogue_id": d["dialogue_id"], "turn_index": d["turn_index"], "label": int(d["rule"]),
        "reviewer": "ana", "time": "2025-03-01T10:00:00Z"}) + "\n" for d in drawn))
    assert main(["validate", "labels", str(labels)]) == 0
    report = tmp_path / "report.json"
    assert main(["agreement", str(run_dir), "--human", str(labels), "--sample", str(sample),
                 "--n-boot", "50", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "Population agreement from the stratified sample (judge-rule design)" in out
    assert "Chance-corrected agreement" in out and "Gwet's AC1" in out
    block = json.loads(report.read_text())["population"]
    assert block["labelled_turns"] == 6 and block["population_turns"] == 11
    # the human copies RULE-2.1 here, so RULE-2.1 agrees with the human everywhere
    rule = next(p for p in block["pairs"] if p["a"] == "RULE-2.1")
    assert rule["accuracy"]["value"] == pytest.approx(100.0)


def test_audit_writes_candidates_and_page(run_dir, tmp_path, capsys):
    jsonl, page = tmp_path / "c.jsonl", tmp_path / "a.html"
    assert main(["audit", str(run_dir), "--gold", "2.1", "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--schema", str(EXAMPLES / "schema.json"),
                 "--candidates", str(jsonl), "--out", str(page)]) == 0
    out = capsys.readouterr().out
    assert "ranked candidates" in out
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert records and records[0]["rank"] == 1 and records[0]["gold_version"] == "2.1"
    assert "Suspected gold errors of 2.1" in page.read_text(encoding="utf-8")
    # plain predictions files, CSV by extension
    table = tmp_path / "c.csv"
    assert main(["audit", str(EXAMPLES / "predictions.jsonl"),
                 str(EXAMPLES / "predictions-weak.jsonl"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--candidates", str(table)]) == 0
    with table.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and {"dialogue_id", "turn_index", "slot", "gold_version", "gold_value",
                     "predicted", "evidence", "score"} <= set(rows[0])


def test_audit_errors_are_clear(run_dir, tmp_path, capsys):
    assert main(["audit", str(run_dir)]) == 2
    assert "--candidates FILE, --out HTML" in capsys.readouterr().err
    assert main(["audit", str(EXAMPLES / "predictions.jsonl"), "--candidates",
                 str(tmp_path / "c.jsonl")]) == 2
    assert "--dialogues" in capsys.readouterr().err
    assert main(["audit", str(run_dir), "--gold", "9.9", "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--candidates",
                 str(tmp_path / "c.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "unknown annotation version '9.9'" in err and "Traceback" not in err


def test_labels_errors_are_clear(run_dir, tmp_path, capsys):
    assert main(["labels", "sample", str(run_dir), "--n", "5", "--gold", "3.0", "--out",
                 str(tmp_path / "s.jsonl")]) == 2
    assert "no RULE verdicts for version '3.0'" in capsys.readouterr().err
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({"dialogue_id": "EX001.json", "turn_index": 0, "label": None})
                   + "\n")
    assert main(["agreement", str(run_dir), "--human", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1: field 'label'" in err and "unsure" in err
