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

from ..conftest import assert_located, write_jsonl

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


BAD_DIALOGUES = [  # (record, the field the loader must name)
    ({"turns": GOOD_DIALOGUE["turns"]}, "dialogue_id"),
    ({"dialogue_id": "D1", "turns": []}, "turns"),
    ({"dialogue_id": "D1", "turns": [{"turn_index": -1}]}, "turns[0].turn_index"),
    pytest.param({"dialogue_id": "D1", "turns": [{"turn_index": 0,
                                                   "gold_state_21": {"hotel-stars": 4}}]},
                 "turns[0].gold_state_21.hotel-stars"),
    ({"dialogue_id": "D1", "turns": [{"turn_index": 0, "user": ["hi"]}]}, "turns[0].user"),
]
BAD_PREDICTIONS = [
    ({"dialogue_id": "D1", "turns": [{"turn_index": 0}]}, "turns[0].pred_state"),
    ({"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {"a-b": None}}]},
     "turns[0].pred_state.a-b"),
    ({"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {},
                                      "pred_hyps": {"a-b": [["x", 2.0]]}}]},
     "turns[0].pred_hyps.a-b[0]"),
    ({"dialogue_id": "D1", "turns": [{"turn_index": 0, "pred_state": {},
                                      "pred_turn_raw": [["a-b"]]}]},
     "turns[0].pred_turn_raw[0][1]"),  # the missing value of the [slot, value] pair
]


@pytest.mark.parametrize(("record", "field"), BAD_DIALOGUES)
def test_bad_dialogue_rejected_by_both(tmp_path, record, field):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD_DIALOGUE | {"dialogue_id": "D0"}, record])
    assert {p.line for p in validate_file("dialogues", path)} == {2}
    with pytest.raises(InputError) as err:
        load_dialogues(path)
    assert_located(err.value, path, 2, field)


@pytest.mark.parametrize(("record", "field"), BAD_PREDICTIONS)
def test_bad_prediction_rejected_by_both(tmp_path, record, field):
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [
        GOOD_DIALOGUE | {"dialogue_id": "D0"}, GOOD_DIALOGUE]))
    path = write_jsonl(tmp_path / "p.jsonl", [GOOD_PRED | {"dialogue_id": "D0"}, record])
    assert {p.line for p in validate_file("predictions", path)} == {2}
    with pytest.raises(InputError) as err:
        load_predictions(path, dialogues)
    assert_located(err.value, path, 2, field)


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
    assert "3 problems in" in err


def test_validate_prints_schema(capsys):
    assert main(["validate", "predictions", "--print-schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"].startswith("one line of")
