"""Review without a judge run: the candidates file of an audit of predictions files carries an
id and the dialogue text, its filled-in decisions become a corrections file, and a re-audit
with those corrections does not ask about the decided candidates again."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from judge.cli import main

from ..conftest import EXAMPLES

AUDIT = [str(EXAMPLES / "predictions.jsonl"), str(EXAMPLES / "predictions-weak.jsonl"),
         "--dialogues", str(EXAMPLES / "dialogues.jsonl"), "--schema",
         str(EXAMPLES / "schema.json")]


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def sheet(tmp_path: Path) -> Path:
    path = tmp_path / "candidates.csv"
    assert main(["audit", *AUDIT, "--candidates", str(path)]) == 0
    return path


def test_the_candidates_file_carries_an_id_and_the_dialogue(sheet, tmp_path):
    rows = rows_of(sheet)
    assert rows
    first = rows[0]
    assert first["id"] == f"{first['dialogue_id']}:{first['turn_index']}:{first['slot']}"
    # the dialogue up to the candidate's turn, as the example file has it
    dialogue = next(json.loads(line) for line in
                    (EXAMPLES / "dialogues.jsonl").read_text().splitlines()
                    if json.loads(line)["dialogue_id"] == first["dialogue_id"])
    turn = dialogue["turns"][int(first["turn_index"])]
    assert f"{first['turn_index']} user: {turn['user']}" in first["context"]
    assert first["context"].startswith(f"0 user: {dialogue['turns'][0]['user']}")
    assert first["decision"] == first["value"] == ""
    # the later turns a fix carries to: the next turn's words, where the annotation keeps
    # the same value there
    carried = [r for r in rows if r["later"]]
    assert carried
    row = carried[0]
    turns = next(json.loads(line) for line in
                 (EXAMPLES / "dialogues.jsonl").read_text().splitlines()
                 if json.loads(line)["dialogue_id"] == row["dialogue_id"])["turns"]
    following = turns[int(row["turn_index"]) + 1]
    assert row["later"].startswith(f"{following['turn_index']} user: {following['user']}")
    jsonl = tmp_path / "c.jsonl"
    assert main(["audit", *AUDIT, "--candidates", str(jsonl)]) == 0
    record = json.loads(jsonl.read_text().splitlines()[0])
    assert record["id"] == first["id"]
    assert record["context"][-1]["user"] == turn["user"]
    assert record["decision"] is None


def test_decisions_become_corrections_and_a_reaudit_leaves_them_out(sheet, tmp_path, capsys):
    rows = rows_of(sheet)
    accepted, rejected, edited = rows[0], rows[1], rows[2]
    accepted["decision"] = "accept"
    rejected["decision"] = "Reject"
    edited["value"] = "a value of my own"  # a value with no decision is an edit
    reviewed = write_rows(tmp_path / "reviewed.csv", rows)
    out = tmp_path / "corrections.jsonl"
    assert main(["corrections", "from-candidates", str(reviewed), "--reviewer", "ann",
                 "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["candidate"] for r in records] == [accepted["id"], rejected["id"], edited["id"]]

    def cell(value: str) -> str | None:
        return value or None

    assert records[0]["value"] == cell(accepted["predicted"])
    assert records[1]["value"] == records[1]["was"] == cell(rejected["gold_value"])
    assert records[2]["value"] == "a value of my own"
    assert all(r["reviewer"] == "ann" and r["gold"] == "2.1" for r in records)
    assert main(["validate", "corrections", str(out)]) == 0

    again = tmp_path / "again.csv"
    capsys.readouterr()
    assert main(["audit", *AUDIT, "--corrections", str(out), "--candidates", str(again)]) == 0
    assert "left out" in capsys.readouterr().out
    ids = [r["id"] for r in rows_of(again)]
    decided = {accepted["id"], rejected["id"], edited["id"]}
    assert not decided & set(ids)
    # the undecided candidates are all still there, ranked from 1
    assert set(ids) == {r["id"] for r in rows} - decided
    assert [int(r["rank"]) for r in rows_of(again)] == list(range(1, len(ids) + 1))


def test_jsonl_decisions_and_their_errors(sheet, tmp_path, capsys):
    jsonl = tmp_path / "c.jsonl"
    assert main(["audit", *AUDIT, "--candidates", str(jsonl)]) == 0
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    records[0]["decision"] = "edit"  # value null: the slot holds none
    records[1]["decision"] = "maybe"
    path = tmp_path / "reviewed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "corrections.jsonl"
    assert main(["corrections", "from-candidates", str(path), "--reviewer", "ann",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "reviewed.jsonl:2" in err and "decision" in err
    assert "Traceback" not in err
    records[1]["decision"] = None
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["corrections", "from-candidates", str(path), "--reviewer", "ann",
                 "--out", str(out)]) == 0
    (only,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert only["value"] is None and only["candidate"] == records[0]["id"]


def test_one_candidate_decided_two_ways_is_refused(sheet, tmp_path, capsys):
    rows = rows_of(sheet)
    rows.append(dict(rows[0]))
    rows[0]["decision"] = "accept"
    rows[-1]["decision"] = "reject"
    reviewed = write_rows(tmp_path / "reviewed.csv", rows)
    assert main(["corrections", "from-candidates", str(reviewed), "--reviewer", "ann",
                 "--out", str(tmp_path / "c.jsonl")]) == 2
    err = capsys.readouterr().err
    assert rows[0]["id"] in err and "line 2" in err and "reviewed.csv" in err


def test_nothing_decided_is_an_error(sheet, tmp_path, capsys):
    assert main(["corrections", "from-candidates", str(sheet), "--reviewer", "ann",
                 "--out", str(tmp_path / "c.jsonl")]) == 2
    assert "no decided candidates" in capsys.readouterr().err


def test_submit_audit_sends_every_predictions_file_and_the_corrections(tmp_path):
    """``dst-judge submit audit --predictions P1 P2 --corrections C`` asks for an audit of
    predictions files: every predictions file (a list) and the corrections, uploaded."""
    import argparse

    from judge.cli import _remote

    uploaded: list[tuple[str, str]] = []

    class Uploads:
        def upload(self, path: str, kind: str) -> object:
            uploaded.append((Path(path).name, kind))
            return argparse.Namespace(id=f"file_{len(uploaded)}")

    corrections = tmp_path / "c.jsonl"
    corrections.write_text("{}\n")
    args = argparse.Namespace(
        kind="audit", schema=None, dialogues=str(EXAMPLES / "dialogues.jsonl"), rules=None,
        predictions=[str(EXAMPLES / "predictions.jsonl"),
                     str(EXAMPLES / "predictions-weak.jsonl")],
        corrections=[str(corrections)], human=None, run=None, runs=None, systems=None)
    inputs = _remote._inputs(Uploads(), args)
    assert inputs == {"dialogues": "file_1", "predictions": ["file_2", "file_3"],
                      "corrections": ["file_4"]}
    assert ("c.jsonl", "corrections") in uploaded


def test_the_audit_page_names_each_candidate_by_the_same_id(sheet, tmp_path):
    page = tmp_path / "audit.html"
    assert main(["audit", *AUDIT, "--out", str(page)]) == 0
    html = page.read_text()
    for row in rows_of(sheet):
        assert f'data-candidate="{row["id"]}"' in html
