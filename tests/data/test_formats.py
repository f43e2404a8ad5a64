"""The published JSON Schemas: examples conform, bad records are rejected by both the JSON
Schema and the loaders, and ``validate`` lists every problem with line and field."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from judge import InputError, load_dialogues, load_predictions
from judge.cli import main
from judge.data import json_schema, validate_file

from ..conftest import write_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOOD_DIALOGUE = {"dialogue_id": "D1", "turns": [
    {"turn_index": 0, "user": "hi", "gold_state_21": {"hotel-area": "north"}}]}
GOOD_PRED = {"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {}}]}


@pytest.mark.parametrize("kind", ["schema", "dialogues", "predictions"])
def test_schemas_are_valid_draft_2020_12(kind):
    jsonschema.Draft202012Validator.check_schema(json_schema(kind))


@pytest.mark.parametrize(("kind", "name"), [("schema", "schema.json"),
                                            ("dialogues", "dialogues.jsonl"),
                                            ("predictions", "predictions.jsonl")])
def test_examples_conform(kind, name):
    assert validate_file(kind, EXAMPLES / name) == []


BAD_DIALOGUES = [
    {"turns": GOOD_DIALOGUE["turns"]},
    {"dialogue_id": "D1", "turns": []},
    {"dialogue_id": "D1", "turns": [{"turn_index": -1}]},
    {"dialogue_id": "D1", "turns": [{"turn_index": 0, "gold_state_21": {"hotel-stars": 4}}]},
    {"dialogue_id": "D1", "turns": [{"turn_index": 0, "user": ["hi"]}]},
]
BAD_PREDICTIONS = [
    {"dialogue_id": "D1", "turns": [{"turn_index": 0}]},
    {"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {"a-b": None}}]},
    {"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {},
                                     "pred_hyps": {"a-b": [["x", 2.0]]}}]},
    {"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {},
                                     "pred_turn_raw": [["a-b"]]}]},
]


@pytest.mark.parametrize("record", BAD_DIALOGUES)
def test_bad_dialogue_rejected_by_both(tmp_path, record):
    path = write_jsonl(tmp_path / "d.jsonl", [record])
    assert validate_file("dialogues", path)
    with pytest.raises(InputError):
        load_dialogues(path)


@pytest.mark.parametrize("record", BAD_PREDICTIONS)
def test_bad_prediction_rejected_by_both(tmp_path, record):
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [GOOD_DIALOGUE]))
    path = write_jsonl(tmp_path / "p.jsonl", [record])
    assert validate_file("predictions", path)
    with pytest.raises(InputError):
        load_predictions(path, dialogues)


def test_validate_lists_every_problem_with_line_and_field(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    bad = json.loads(json.dumps(GOOD_DIALOGUE))
    bad["turns"][0]["gold_state_24"] = {"hotel-stars": 4, "hotel-area": 5}
    path.write_text(json.dumps(GOOD_DIALOGUE) + "\n" + json.dumps(bad) + "\n{oops\n")
    problems = validate_file("dialogues", path)
    assert [(p.line, p.field) for p in problems] == [
        (2, "turns[0].gold_state_24.hotel-area"), (2, "turns[0].gold_state_24.hotel-stars"),
        (3, None)]
    assert main(["validate", "dialogues", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: field 'turns[0].gold_state_24.hotel-stars': 4 is not of type 'string'" in err
    assert "3 problem(s)" in err


def test_validate_prints_schema(capsys):
    assert main(["validate", "predictions", "--print-schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"].startswith("one line of")
