"""The MultiWOZ ``data.json`` and ConvLab-3 dialogue readers called directly on small documents
written here: the record each builds (names, values, utterances, the closing system turn) and,
for each malformed piece, the message and the JSON path it names. Written where mutation
testing found changed lines no test noticed (bench/mutation.py data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge import InputError
from judge.data import Context, open_source
from judge.data._convert import _convlab, _multiwoz, _sgd

from ..conftest import assert_located


def _read(reader: Any, tmp_path: Path, document: Any, **context: Any) -> list[Any]:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return list(reader(open_source(path), Context(**context)))


def _refused(reader: Any, tmp_path: Path, document: Any, field: str, reason: str) -> None:
    """The reader refuses ``document`` naming the file, the JSON path and the reason."""
    with pytest.raises(InputError) as caught:
        _read(reader, tmp_path, document)
    assert_located(caught.value, tmp_path / "data.json", None, field)
    assert str(caught.value).endswith(f"field '{field}': {reason}"), str(caught.value)


METADATA = {
    "Hotel": {"semi": {"Area": "north", "name": "not mentioned", "type": ""},
              "book": {"booked": [{"name": "x"}], "Day": "friday", "people": "2",
                       "extra": {"nested": 1}}},
    "train": {"semi": {"leaveAt": "dont care"}, "book": {}},
    "police": {"book": {"booked": []}},
}


def test_multiwoz_log_to_turns_and_states(tmp_path) -> None:
    document = {"MUL1.json": {"goal": {}, "log": [
        {"text": "I need a hotel.", "metadata": {}},
        {"text": "Where?", "metadata": METADATA},
        {"text": "North.", "metadata": {}},
        {"text": "Done.", "metadata": {"hotel": {"semi": {"area": "north"}}}}]}}
    ((where, record),) = _read(_multiwoz.read_dialogues, tmp_path, document, version="2.4")
    assert where == "MUL1.json"
    assert record == {"dialogue_id": "MUL1.json", "final_system": "Done.", "turns": [
        {"turn_index": 0, "system": "", "user": "I need a hotel.",
         # lower-case names; booking slots prefixed; no-value spellings and the booked
         # results dropped; every dont-care spelling is dontcare
         "gold_state_24": {"hotel-area": "north", "hotel-book day": "friday",
                           "hotel-book people": "2", "train-leaveat": "dontcare"}},
        {"turn_index": 1, "system": "Where?", "user": "North.",
         "gold_state_24": {"hotel-area": "north"}}]}
    # no version given: the file's name says none, so the state is the single "gold"
    (unlabelled,) = _read(_multiwoz.read_dialogues, tmp_path, document)
    assert "gold_state" in unlabelled[1]["turns"][0]


def test_multiwoz_malformed_pieces_are_named(tmp_path) -> None:
    read = _multiwoz.read_dialogues
    cases = [
        ({"D": {"log": []}}, "D.log", "expected a non-empty 'log' list"),
        ({"D": []}, "D.log", "expected a non-empty 'log' list"),
        ({"D": {"log": [{"text": 1}, {"metadata": {}}]}}, "D.log[0]",
         "expected an utterance with 'text'"),
        ({"D": {"log": [{"text": "hi"}]}}, "D.log[0]",
         "the log ends with a user utterance: its state is missing"),
        ({"D": {"log": [{"text": "hi"}, {"metadata": []}]}}, "D.log[1].metadata",
         "expected a 'metadata' object"),
        ({"D": {"log": [{"text": "hi"}, {"metadata": {"hotel": "x"}}]}},
         "D.log[1].metadata.hotel", "expected {'semi': ..., 'book': ...}"),
        ({"D": {"log": [{"text": "hi"}, {"metadata": {"hotel": {"book": ["x"]}}}]}},
         "D.log[1].metadata.hotel.book", "expected an object of slots"),
    ]
    for document, field, reason in cases:
        _refused(read, tmp_path, document, field, reason)


def test_multiwoz_written_back_per_half() -> None:
    record = {"dialogue_id": "MUL1.json", "final_system": "Bye.", "turns": [
        {"user": "u0", "system": "", "gold_state_21": {"hotel-area": "n"},
         "gold_state_24": {"hotel-area": "s", "hotel-book day": "fri"}},
        {"user": "u1", "system": "s1", "gold_state_21": {}, "gold_state_24": {}}]}
    written = _multiwoz.write_dialogues([record], Context(version="2.4"))
    assert written == {"MUL1.json": {"goal": {}, "log": [
        {"text": "u0", "metadata": {}},
        {"text": "s1", "metadata": {"hotel": {"book": {"booked": [], "day": "fri"},
                                              "semi": {"area": "s"}}}},
        {"text": "u1", "metadata": {}},
        {"text": "Bye.", "metadata": {}}]}}
    # without a version (or one the record lacks): the first gold key
    first = _multiwoz.write_dialogues([record], Context(version="2.2"))
    assert first["MUL1.json"]["log"][1]["metadata"] == {
        "hotel": {"book": {"booked": []}, "semi": {"area": "n"}}}
    bare = {"dialogue_id": "D", "turns": [{"user": "u", "gold_turn_state": {"a-b": "1"}}]}
    assert _multiwoz.write_dialogues([bare], Context())["D"]["log"][1]["metadata"] == {}


CONVLAB = [{"dataset": "multiwoz21", "data_split": "test", "dialogue_id": "multiwoz21-test-1",
            "original_id": "MUL1.json", "turns": [
                {"speaker": "user", "utterance": "Hi.", "state": {"hotel": {"area": "north",
                                                                           "name": ""}}},
                {"speaker": "system", "utterance": "Hello."},
                {"speaker": "user", "utterance": "Bye.", "state": {}},
                {"speaker": "system", "utterance": "Goodbye."}]},
           {"dialogue_id": "plain-2", "turns": [{"speaker": "user", "utterance": "x"}]}]


def test_convlab_dialogues_read(tmp_path) -> None:
    (first, second) = _read(_convlab.read_dialogues, tmp_path, CONVLAB, version="2.1")
    assert first == ("[0]", {
        "dialogue_id": "MUL1.json", "dataset": "multiwoz21", "data_split": "test",
        "convlab_id": "multiwoz21-test-1", "final_system": "Goodbye.", "turns": [
            {"turn_index": 0, "system": "", "user": "Hi.",
             "gold_state_21": {"hotel-area": "north"}},
            {"turn_index": 1, "system": "Hello.", "user": "Bye.", "gold_state_21": {}}]})
    assert second == ("[1]", {"dialogue_id": "plain-2", "turns": [
        {"turn_index": 0, "system": "", "user": "x", "gold_state_21": {}}]})


def test_convlab_malformed_pieces_are_named(tmp_path) -> None:
    read = _convlab.read_dialogues
    cases = [
        ([{"dialogue_id": "d"}], "[0]", "expected a dialogue with a 'turns' list"),
        (["x"], "[0]", "expected a dialogue with a 'turns' list"),
        ([{"turns": []}], "[0].dialogue_id", "expected a 'dialogue_id' (or 'original_id')"),
        ([{"dialogue_id": "", "turns": []}], "[0].dialogue_id",
         "expected a 'dialogue_id' (or 'original_id')"),
        ([{"dialogue_id": "d", "turns": ["x"]}], "[0].turns[0]", "expected a turn object"),
        ([{"dialogue_id": "d", "turns": [{"speaker": "bot"}]}], "[0].turns[0].speaker",
         "speaker 'bot' is neither user nor system"),
        ([{"dialogue_id": "d", "turns": [{"speaker": "system", "utterance": "x"}]}],
         "[0].turns", "a dialogue without user turns"),
    ]
    for document, field, reason in cases:
        _refused(read, tmp_path, document, field, reason)


SGD = [{"dialogue_id": "1_00001", "services": ["Restaurants_1", "Buses_1"], "turns": [
    {"speaker": "USER", "utterance": "Find food in Napa", "frames": [
        {"service": "Restaurants_1", "slots": [{"slot": "city", "start": 13,
                                                "exclusive_end": 17}],
         "state": {"active_intent": "FindRestaurants",
                   "slot_values": {"city": ["Napa", "napa"], "cuisine": []}}}]},
    {"speaker": "SYSTEM", "utterance": "Which time?", "frames": [
        {"service": "Restaurants_1", "slots": [{"slot": "time", "value": "7pm",
                                                "copy_from": "x"}]}]},
    {"speaker": "USER", "utterance": "7pm, and a bus", "frames": [
        {"service": "Restaurants_1", "slots": [],
         "state": {"active_intent": "FindRestaurants",
                   "slot_values": {"city": ["Napa"], "time": "7pm"}}},
        {"service": "Buses_1", "slots": [],
         "state": {"active_intent": "NONE", "slot_values": {"to_city": ["LA", "Los Angeles"]}}}]},
    {"speaker": "SYSTEM", "utterance": "Done."}]}]


def test_sgd_dialogues_read_with_spans_and_intents(tmp_path) -> None:
    ((where, record),) = _read(_sgd.read_dialogues, tmp_path, SGD)
    assert where == "[0]"
    span = {"speaker": "user", "slot": "restaurants-city", "start": 13, "end": 17,
            "value": "Napa"}
    asked = {"speaker": "system", "slot": "restaurants-time", "value": "7pm", "copy_from": "x"}
    assert record == {
        "dialogue_id": "1_00001", "services": ["Restaurants_1", "Buses_1"],
        "final_system": "Done.", "turns": [
            # gold keeps every spelling of a value as alternatives; two services with states,
            # so the intent is given per domain (NONE is no intent)
            {"turn_index": 0, "system": "", "user": "Find food in Napa",
             "gold_state": {"restaurants-city": "Napa|napa"}, "spans": [span],
             "active_intent": {"restaurants": "FindRestaurants"}},
            {"turn_index": 1, "system": "Which time?", "user": "7pm, and a bus",
             "gold_state": {"restaurants-city": "Napa", "restaurants-time": "7pm",
                            "buses-to_city": "LA|Los Angeles"},
             "spans": [asked], "active_intent": {"restaurants": "FindRestaurants"}}]}


def test_sgd_predictions_take_the_first_value(tmp_path) -> None:
    ((_, record),) = _read(_sgd.read_predictions, tmp_path, SGD, system_name="sys")
    assert record == {"dialogue_id": "1_00001", "services": ["Restaurants_1", "Buses_1"],
                      "system_name": "sys", "turns": [
                          {"turn_index": 0, "pred_state": {"restaurants-city": "Napa"}},
                          {"turn_index": 1, "pred_state": {"restaurants-city": "Napa",
                                                           "restaurants-time": "7pm",
                                                           "buses-to_city": "LA"}}]}


def test_sgd_malformed_pieces_are_named(tmp_path) -> None:
    def user(frame: dict, utterance: str = "hi") -> list:
        return [{"dialogue_id": "d", "turns": [{"speaker": "USER", "utterance": utterance,
                                                 "frames": [frame]}]}]

    frame = "[0].turns[0].frames[0]"
    cases = [
        (["x"], "[0]", "expected a dialogue with a 'turns' list"),
        ([{"turns": []}], "[0].dialogue_id", "expected a 'dialogue_id'"),
        ([{"dialogue_id": "d", "turns": ["x"]}], "[0].turns[0]", "expected a turn object"),
        ([{"dialogue_id": "d", "turns": [{"speaker": "BOT"}]}], "[0].turns[0].speaker",
         "speaker 'BOT' is neither USER nor SYSTEM"),
        (user({"service": "A_1"}), f"{frame}.state", "a user frame needs a 'state' object"),
        (user({"service": "A_1", "state": {"slot_values": ["x"]}}),
         f"{frame}.state.slot_values", "expected an object of slot value lists"),
        (user({"service": "A_1", "state": {}, "slots": [{"value": "x"}]}), f"{frame}.slots[0]",
         "expected a span with 'slot'"),
        (user({"service": "A_1", "state": {}, "slots": [{"slot": "s", "start": 0,
                                                         "exclusive_end": 5}]}),
         f"{frame}.slots[0]", "span [0, 5) is outside the utterance (2 characters)"),
        ([{"dialogue_id": "d", "turns": [{"speaker": "SYSTEM", "utterance": "x"}]}],
         "[0].turns", "a dialogue without user turns"),
    ]
    for document, field, reason in cases:
        _refused(_sgd.read_dialogues, tmp_path, document, field, reason)
