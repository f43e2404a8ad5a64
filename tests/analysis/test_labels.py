"""The grown labels format: per-slot labels, unsure, reviewer, time, note; old files still read;
the published JSON Schema accepts and rejects what the loader does."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from judge import InputError
from judge.analysis import HumanLabel, load_labels, write_labels

from ..conftest import write_jsonl

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "judge" / "data" / "formats"
                     / "labels.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())

FULL = {
    "dialogue_id": "MUL0001.json", "turn_index": 2, "label": 0, "unsure": False,
    "reviewer": "ana", "time": "2025-03-01T14:05:00Z", "note": "day is wrong",
    "slots": {
        "hotel-book day": {"label": 0, "value": "friday", "expected": "saturday",
                           "note": "user said saturday"},
        "hotel-area": {"label": 1, "value": "north"},
        "hotel-stars": {"label": None, "unsure": True, "value": None},
    },
}
OLD = {"dialogue_id": "MUL0001", "turn_index": 3, "label": 1, "annotator": "bob", "note": "ok"}


def test_full_record_reads_and_validates(tmp_path):
    assert not list(VALIDATOR.iter_errors(FULL))
    labels = load_labels(write_jsonl(tmp_path / "l.jsonl", [FULL, OLD]))
    full, old = labels.records
    assert full.person == "ana" and old.person == "bob"
    assert labels.annotators == ("ana", "bob")
    assert full.slots["hotel-book day"].expected == "saturday"
    assert labels.per_turn() == {("mul0001", 2): 0, ("mul0001", 3): 1}
    # the unsure slot label is kept but does not count
    assert labels.per_slot() == {("mul0001", 2, "hotel-book day"): 0,
                                 ("mul0001", 2, "hotel-area"): 1}


def test_unsure_turn_labels_count_nowhere(tmp_path):
    records = [
        {"dialogue_id": "D0", "turn_index": 0, "label": None, "unsure": True, "reviewer": "a"},
        {"dialogue_id": "D0", "turn_index": 0, "label": 0, "unsure": True, "reviewer": "b"},
        {"dialogue_id": "D0", "turn_index": 0, "label": 1, "reviewer": "c"},
    ]
    for record in records:
        assert not list(VALIDATOR.iter_errors(record))
    labels = load_labels(write_jsonl(tmp_path / "l.jsonl", records))
    assert labels.unsure_turns == 2
    assert labels.per_turn() == {("d0", 0): 1}  # only c's label votes
    assert labels.by_annotator() == {"a": {}, "b": {}, "c": {("d0", 0): 1}}


def test_reviewer_and_annotator_are_one_field(tmp_path):
    same = {"dialogue_id": "D0", "turn_index": 0, "label": 1, "reviewer": "x", "annotator": "x"}
    assert load_labels(write_jsonl(tmp_path / "a.jsonl", [same])).annotators == ("x",)
    # one person, two spellings, one turn: a duplicate
    path = write_jsonl(tmp_path / "b.jsonl", [
        {"dialogue_id": "D0", "turn_index": 0, "label": 1, "reviewer": "x"},
        {"dialogue_id": "d0", "turn_index": 0, "label": 0, "annotator": "x"}])
    with pytest.raises(InputError, match="already labelled") as info:
        load_labels(path)
    assert info.value.line == 2


BAD = [
    ({"label": None}, "label"),                                    # null without unsure
    ({"reviewer": "x", "annotator": "y"}, "reviewer"),             # two people in one record
    ({"time": "yesterday"}, "time"),
    ({"unsure": "yes"}, "unsure"),
    ({"reviwer": "x"}, "reviwer"),                                 # misspelt field
    ({"slots": {"hotel-area": {"label": 2}}}, "slots.hotel-area.label"),
    ({"slots": {"hotel-area": {"label": None}}}, "slots.hotel-area.label"),
    ({"slots": {"hotel-area": {"label": 1, "why": "?"}}}, "slots.hotel-area.why"),
    ({"label": 1, "slots": {"hotel-area": {"label": 0}}}, "slots.hotel-area.label"),
]


@pytest.mark.parametrize(("change", "field"), BAD)
def test_bad_records_name_line_and_field(tmp_path, change, field):
    record = {"dialogue_id": "D0", "turn_index": 0, "label": 0, **change}
    path = write_jsonl(tmp_path / "l.jsonl", [OLD, record])
    with pytest.raises(InputError) as info:
        load_labels(path)
    assert (info.value.line, info.value.field) == (2, field)
    # the JSON Schema rejects the same record, except the cross-field rules it cannot state
    # (two spellings of one name, a correct turn with an incorrect slot)
    if field not in ("reviewer",) and change.get("label") != 1:
        assert list(VALIDATOR.iter_errors(record)), change


def test_a_correct_turn_may_hold_an_unsure_incorrect_slot(tmp_path):
    record = {"dialogue_id": "D0", "turn_index": 0, "label": 1,
              "slots": {"hotel-area": {"label": 0, "unsure": True}}}
    assert load_labels(write_jsonl(tmp_path / "l.jsonl", [record])).per_slot() == {}


def test_write_labels_round_trips_models_and_keeps_old_files_old(tmp_path):
    models = [HumanLabel.model_validate(FULL), HumanLabel.model_validate(OLD)]
    path = tmp_path / "out" / "labels.jsonl"
    assert write_labels(models, path) == 2
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[1] == OLD  # no new field appears in an old-style record
    assert load_labels(path).records == models
