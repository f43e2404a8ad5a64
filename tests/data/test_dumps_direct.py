"""The readers of models' own dumps called directly on small files written here: per-turn JSON
Lines (id, turn and state keys in each spelling, turns out of order, gold versions, a turn
output beside the state) and mwzeval dicts (slot names mapped back with and without a schema),
with the line and field each malformed piece is reported at. Written where mutation testing
found changed lines no test noticed (bench/mutation.py data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge import InputError, load_schema
from judge.data import Context, open_source
from judge.data._convert import _dumps

from ..conftest import FIXTURES, assert_located


def _lines(tmp_path: Path, rows: list[Any]) -> Path:
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_per_turn_lines_as_predictions(tmp_path) -> None:
    path = _lines(tmp_path, [
        {"dial_id": "B", "turn": "1", "prediction": ["hotel-area-north"]},
        {"dialogue_id": "A", "turn_idx": 1, "belief_state": {"hotel": {"area": "south"}}},
        {"dialogue_id": "A", "turn_id": 0, "pred_state": {"hotel-area": "north"},
         "pred_turn_state": {"hotel-area": "north", "hotel-name": ""}},
        {"dialogue": "B", "turn_index": 0, "pred_turn_state": {"hotel-area": "not mentioned"}},
    ])
    read = list(_dumps.read_turns(open_source(path), Context(system_name="sys"), gold=False))
    # one record per dialogue in the order met, turns sorted by number and renumbered,
    # located at the line of its first turn
    assert read == [
        ("line 4", {"dialogue_id": "B", "system_name": "sys", "turns": [
            # a turn output alone; its "no value" is an explicit deletion
            {"turn_index": 0, "pred_turn_state": {"hotel-area": "none"}},
            {"turn_index": 1, "pred_state": {"hotel-area": "north"}}]}),
        ("line 3", {"dialogue_id": "A", "system_name": "sys", "turns": [
            {"turn_index": 0, "pred_state": {"hotel-area": "north"},
             "pred_turn_state": {"hotel-area": "north", "hotel-name": "none"}},
            {"turn_index": 1, "pred_state": {"hotel-area": "south"}}]})]
    unnamed = list(_dumps.read_turns(open_source(path), Context(), gold=False))
    assert "system_name" not in unnamed[0][1]


def test_per_turn_lines_as_dialogues(tmp_path) -> None:
    path = _lines(tmp_path, [
        {"dialogue_id": "A", "turn_index": 0, "user": "hi", "system": 3,
         "gold_state_21": {"hotel-area": "north"}, "gold_state_24": {"hotel-area": "south"}},
        {"dialogue_id": "A", "turn_index": 1, "belief_state": ["hotel-area-east"]},
    ])
    ((where, record),) = _dumps.read_turns(open_source(path), Context(version="2.4"), gold=True)
    assert where == "line 1"
    assert record == {"dialogue_id": "A", "turns": [
        {"turn_index": 0, "system": "3", "user": "hi", "gold_state_21": {"hotel-area": "north"},
         "gold_state_24": {"hotel-area": "south"}},
        # a bare state is the version the context names
        {"turn_index": 1, "system": "", "user": "", "gold_state_24": {"hotel-area": "east"}}]}


@pytest.mark.parametrize(("row", "line", "field", "reason", "gold"), [
    (["not an object"], 2, None, "expected a JSON object", False),
    ({"turn_index": 0}, 2, "dialogue_id", "expected 'dialogue_id'", False),
    ({"dialogue_id": "", "turn_index": 0}, 2, "dialogue_id", "expected 'dialogue_id'", False),
    ({"dialogue_id": "A", "turn_index": "x"}, 2, "turn_index", "expected a turn number",
     False),
    ({"dialogue_id": "A", "turn_index": True}, 2, "turn_index", "expected a turn number",
     False),
    ({"dialogue_id": "A", "turn_index": 1}, 2, "pred_state",
     "expected 'pred_state' (or state / belief_state)", False),
    ({"dialogue_id": "A", "turn_index": 1}, 2, "gold_state",
     "expected 'gold_state' (or state / belief_state)", True),
])
def test_per_turn_lines_name_the_line_and_field(tmp_path, row, line, field, reason,
                                                gold) -> None:
    first = {"dialogue_id": "A", "turn_index": 0, "state": {}}
    path = _lines(tmp_path, [first, row])
    with pytest.raises(InputError) as caught:
        list(_dumps.read_turns(open_source(path), Context(), gold=gold))
    assert_located(caught.value, path, line, field)
    assert str(caught.value).endswith(reason)


def test_per_turn_fit() -> None:
    assert _dumps.fit_turns({"dialogue_id": "A", "turn": 0}).ok
    for record, field, reason in [
        ([], "(line 1)", "expected one JSON object per line"),
        ({"turn": 0}, "dialogue_id", "expected 'dialogue_id' on every line"),
        ({"dialogue_id": "A", "turns": [], "turn": 0}, "turns",
         "a line with 'turns' is a whole dialogue (native format)"),
        ({"dialogue_id": "A"}, "turn_index",
         "expected 'turn_index' (or turn_id / turn_idx / turn) on every line"),
    ]:
        fit = _dumps.fit_turns(record)
        assert (fit.ok, fit.field, fit.reason) == (False, field, reason), record


def test_mwzeval_slot_names_mapped_back() -> None:
    # without a schema: the usual MultiWOZ spelling
    assert _dumps.mwzeval_slot("restaurant", "day", None) == "restaurant-book day"
    assert _dumps.mwzeval_slot("train", "day", None) == "train-day"
    assert _dumps.mwzeval_slot("hotel", "stay", None) == "hotel-book stay"
    assert _dumps.mwzeval_slot("taxi", "leave", None) == "taxi-leaveat"
    assert _dumps.mwzeval_slot("taxi", "Arrive", None) == "taxi-arriveby"
    assert _dumps.mwzeval_slot("hotel", "price range", None) == "hotel-pricerange"
    # with one: the first candidate the schema knows, else the name as written
    schema = load_schema(FIXTURES / "schema_small.json")
    assert _dumps.mwzeval_slot("train", "day", schema) == "train-day"
    assert _dumps.mwzeval_slot("restaurant", "time", schema) == "restaurant-book time"
    assert _dumps.mwzeval_slot("train", "leave", schema) == "train-leaveat"
    assert _dumps.mwzeval_slot("train", "people", schema) == "train-book people"
    assert _dumps.mwzeval_slot("police", "Post Code", schema) == "police-Post Code"


def test_mwzeval_read_and_refused(tmp_path) -> None:
    path = tmp_path / "mwz.json"
    path.write_text(json.dumps({"mul0001": [
        {"state": {"restaurant": {"day": "fri", "food": "thai"}}, "response": ""},
        {"state": {"train": {"day": "fri", "leave": "09:00"}}}]}), encoding="utf-8")
    ((where, record),) = _dumps.read_mwzeval(open_source(path), Context())
    assert where == "mul0001"
    assert record == {"dialogue_id": "mul0001", "turns": [
        {"turn_index": 0, "pred_state": {"restaurant-book day": "fri",
                                         "restaurant-food": "thai"}},
        {"turn_index": 1, "pred_state": {"train-day": "fri", "train-leaveat": "09:00"}}]}
    for document, field, reason in [
        ({"d": []}, "d", "expected a non-empty list of turns"),
        ({"d": {"state": {}}}, "d", "expected a non-empty list of turns"),
        ({"d": [{"state": {}}, {"state": []}]}, "d[1].state",
         "expected 'state': {domain: {slot: value}}"),
        ({"d": ["x"]}, "d[0].state", "expected 'state': {domain: {slot: value}}"),
    ]:
        path.write_text(json.dumps(document), encoding="utf-8")
        with pytest.raises(InputError) as caught:
            list(_dumps.read_mwzeval(open_source(path), Context()))
        assert_located(caught.value, path, None, field)
        assert str(caught.value).endswith(reason)


def test_mwzeval_fit() -> None:
    assert _dumps.fit_mwzeval({"d": [{"state": {}}]}).ok
    for document, field, reason in [
        ({}, "(top level)", "expected an object keyed by dialogue id"),
        ([], "(top level)", "expected an object keyed by dialogue id"),
        ({"d": {}}, "d", "expected a list of turns"),
        ({"d": []}, "d[0]", "expected turn objects"),
        ({"d": [{"state": []}]}, "d[0].state", "expected 'state': {domain: {slot: value}}"),
    ]:
        fit = _dumps.fit_mwzeval(document)
        assert (fit.ok, fit.field, fit.reason) == (False, field, reason), document
