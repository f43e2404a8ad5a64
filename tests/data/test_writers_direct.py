"""The foreign-format writers and fit checks called directly on one small native record,
compared field by field with what each format's documentation describes: round trips through
our own readers cannot see a field our readers ignore. Written where mutation testing found
changed lines no test noticed (bench/mutation.py data)."""

from __future__ import annotations

from judge.data import Context, load_schema
from judge.data._convert import _convlab, _dumps
from judge.data._convert._common import gold_of, guess_version, nested

from ..conftest import FIXTURES

RECORD = {"dialogue_id": "MUL0001.json", "final_system": "Bye.", "turns": [
    {"turn_index": 0, "system": "", "user": "A cheap hotel.",
     "gold_state_21": {"hotel-pricerange": "cheap"}},
    {"turn_index": 1, "system": "Which area?", "user": "North, and a taxi at 5.",
     "gold_state_21": {"hotel-pricerange": "cheap", "hotel-area": "north",
                       "taxi-leaveat": "05:00"}}]}

PREDICTED = {"dialogue_id": "MUL0001.json", "turns": [
    {"turn_index": 0, "pred_state": {"hotel-book day": "monday"}},
    {"turn_index": 1, "pred_state": {"train-leaveat": "09:00", "train-arriveby": "10:00",
                                     "hotel-book day": "monday"}}]}


def test_convlab_dialogues_written_turn_by_turn() -> None:
    (dialogue,) = _convlab.write_dialogues([RECORD], Context())
    assert dialogue == {
        "dataset": "converted", "data_split": "test", "dialogue_id": "converted-test-0",
        "original_id": "MUL0001.json", "domains": ["hotel", "taxi"],
        "turns": [
            {"speaker": "user", "utterance": "A cheap hotel.", "utt_idx": 0,
             "dialogue_acts": {}, "state": {"hotel": {"pricerange": "cheap"}}},
            {"speaker": "system", "utterance": "Which area?", "utt_idx": 1,
             "dialogue_acts": {}, "db_results": {}},
            {"speaker": "user", "utterance": "North, and a taxi at 5.", "utt_idx": 2,
             "dialogue_acts": {}, "state": {"hotel": {"pricerange": "cheap", "area": "north"},
                                            "taxi": {"leaveat": "05:00"}}},
            {"speaker": "system", "utterance": "Bye.", "utt_idx": 3, "dialogue_acts": {},
             "db_results": {}}]}


def test_convlab_dialogues_keep_their_own_ids_and_fill_the_ontology() -> None:
    schema = load_schema(FIXTURES / "schema_small.json")
    record = {**RECORD, "dataset": "multiwoz21", "data_split": "val",
              "convlab_id": "multiwoz21-val-7", "final_system": ""}
    (dialogue,) = _convlab.write_dialogues([record, ], Context(schema=schema))
    assert (dialogue["dataset"], dialogue["data_split"], dialogue["dialogue_id"]) == (
        "multiwoz21", "val", "multiwoz21-val-7")
    assert len(dialogue["turns"]) == 3  # no closing system turn without its text
    state = dialogue["turns"][0]["state"]
    # every slot of the schema is written, "" where the turn has no value
    assert state["hotel"]["pricerange"] == "cheap" and state["hotel"]["area"] == ""
    assert state["taxi"] == {"departure": "", "destination": "", "leaveat": "",
                             "arriveby": ""}


def test_convlab_ontology_fit_names_the_field() -> None:
    assert _convlab.fit_ontology({"domains": {"hotel": {"slots": {}}}}).ok
    missing = _convlab.fit_ontology({"domains": []})
    assert not missing.ok
    assert (missing.field, missing.reason) == ("domains",
                                               "expected 'domains' as an object of domains")
    assert not _convlab.fit_ontology([]).ok
    slotless = _convlab.fit_ontology({"domains": {"hotel": {"slots": []}}})
    assert (slotless.ok, slotless.field, slotless.reason) == (
        False, "domains.hotel.slots", "expected 'slots' as an object of slots")
    empty = _convlab.fit_ontology({"domains": {}})
    assert (empty.ok, empty.field) == (False, "domains.None.slots")


def test_mwzeval_predictions_written_with_its_slot_names() -> None:
    written = _dumps.write_mwzeval([PREDICTED], Context())
    # lower-case ids without .json; book prefixes dropped; leaveat/arriveby shortened
    assert written == {"mul0001": [
        {"response": "", "state": {"hotel": {"day": "monday"}}},
        {"response": "", "state": {"train": {"leave": "09:00", "arrive": "10:00"},
                                   "hotel": {"day": "monday"}}}]}
    assert _dumps._mwzeval_name("restaurant-book time") == ("restaurant", "time")
    assert _dumps._mwzeval_name("taxi-arriveby") == ("taxi", "arrive")
    assert _dumps._mwzeval_name("taxi-destination") == ("taxi", "destination")


def test_trade_and_somdst_dumps_pair_prediction_and_gold() -> None:
    gold = [RECORD]
    trade = _dumps.write_trade([PREDICTED], Context(), gold=gold)
    assert trade == {"MUL0001.json": {
        "0": {"turn_belief": ["hotel-pricerange-cheap"],
              "pred_bs_ptr": ["hotel-book day-monday"]},
        "1": {"turn_belief": ["hotel-area-north", "hotel-pricerange-cheap",
                              "taxi-leaveat-05:00"],
              "pred_bs_ptr": ["hotel-book day-monday", "train-arriveby-10:00",
                              "train-leaveat-09:00"]}}}
    somdst = _dumps.write_somdst([PREDICTED], Context(), gold=gold)
    assert somdst == {
        "MUL0001.json_0": [["hotel-book day-monday"], ["hotel-pricerange-cheap"]],
        "MUL0001.json_1": [["hotel-book day-monday", "train-arriveby-10:00",
                            "train-leaveat-09:00"],
                           ["hotel-area-north", "hotel-pricerange-cheap",
                            "taxi-leaveat-05:00"]]}
    assert _dumps.write_trade([PREDICTED], Context())["MUL0001.json"]["0"]["turn_belief"] == []


def test_small_helpers_of_the_converters(tmp_path) -> None:
    assert guess_version(tmp_path / "MultiWOZ_2.4" / "data.json") == "2.4"
    assert guess_version(tmp_path / "mwz21.json") == "2.1"
    assert guess_version(tmp_path / "data.json") is None
    assert nested({"hotel-book day": "monday", "taxi-leaveat": "5"}) == {
        "hotel": {"book day": "monday"}, "taxi": {"leaveat": "5"}}
    assert nested({"hotel-area": "n"}, lambda name: ("h", name.upper())) == {
        "h": {"HOTEL-AREA": "n"}}
    assert gold_of({"turn_index": 0, "gold_state_21": {"a": "1"}, "gold_state": {},
                    "gold_turn_state": {"b": "2"}, "pred_state": {}}) == {
        "gold_state_21": {"a": "1"}, "gold_state": {}}
