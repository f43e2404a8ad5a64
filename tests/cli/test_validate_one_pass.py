"""``validate`` lists every problem of a file in one pass: a slot outside the schema on line 1,
a time with no time zone on line 2 and a missing field on line 3 are all reported at once, in
line order (they came one per run: line 3, then line 2, then line 1)."""

from __future__ import annotations

import json

from judge.cli import main

from ..conftest import EXAMPLES

BASE = {"dialogue_id": "EX001.json", "turn_index": 0, "slot": "hotel-area", "value": "east",
        "gold": "2.1", "reviewer": "ann", "time": "2026-11-28T10:02:11Z"}


def test_every_problem_of_a_corrections_file_in_one_pass(tmp_path, capsys):
    records = [{**BASE, "slot": "hotel-aera"},
               {**BASE, "turn_index": 1, "time": "2026-11-28 10:02"},
               {k: v for k, v in BASE.items() if k != "reviewer"} | {"turn_index": 2}]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["validate", "corrections", str(path), "--schema",
                 str(EXAMPLES / "schema.json")]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(str(path))]
    assert [line.split(":")[1] for line in lines] == ["1", "2", "3"], err
    assert "did you mean 'hotel-area'" in lines[0]
    assert "time" in lines[1] and "date-time" in lines[1]
    assert "reviewer" in lines[2]
    assert "3 problems" in err


def test_a_valid_corrections_file_stays_valid(tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    later = {**BASE, "turn_index": 1, "time": "2026-11-28T10:02:11+01:00"}
    path.write_text(json.dumps(BASE) + "\n" + json.dumps(later) + "\n")
    assert main(["validate", "corrections", str(path), "--schema",
                 str(EXAMPLES / "schema.json")]) == 0
