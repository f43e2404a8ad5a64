"""Turn states ↔ cumulative states, and the integration check of given turn outputs."""

from __future__ import annotations

import json

from judge import load_dialogues, load_predictions
from judge.data import (
    apply_turn_state,
    check_integration,
    cumulative_states,
    turn_state,
    turn_states,
)

from ..conftest import write_jsonl

STATES = [{"hotel-area": "north"},
          {"hotel-area": "south", "hotel-stars": "4"},
          {"hotel-stars": "4"},
          {}]


def test_turn_states_new_or_changed_only():
    assert turn_states(STATES) == [{"hotel-area": "north"},
                                   {"hotel-area": "south", "hotel-stars": "4"}, {}, {}]


def test_turn_states_with_explicit_deletions_round_trip():
    updates = turn_states(STATES, include_removals=True)
    assert updates[2] == {"hotel-area": "none"}
    assert updates[3] == {"hotel-stars": "none"}
    assert cumulative_states(updates) == STATES


def test_alternatives_sharing_a_value_count_as_unchanged():
    old = {"payment-amount": "one hundred bucks"}
    new = {"payment-amount": "$100|one hundred bucks"}
    assert turn_state(old, new, separator="|") == {}
    assert turn_state(old, new) == new


def test_apply_turn_state_deletes_on_none_even_if_absent():
    assert apply_turn_state({"a-b": "x"}, {"a-b": "none", "c-d": "none"}) == {}


def test_integration_report(tmp_path):
    dialogue = {"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "gold_state": {}}, {"turn_index": 1, "gold_state": {}}]}
    pred = {"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "pred_state": {"hotel-area": "north"},
         "pred_turn_state": {"hotel-area": "north"}},
        {"turn_index": 1, "pred_state": {"hotel-area": "north"},
         "pred_turn_state": {"hotel-stars": "4"}}]}
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [dialogue]))
    preds = load_predictions(write_jsonl(tmp_path / "p.jsonl", [json.loads(json.dumps(pred))]),
                             dialogues)
    issues = check_integration(preds)
    assert [(i.dialogue_id, i.turn_index) for i in issues] == [("D1", 1)]
    assert issues[0].expected == {"hotel-area": "north", "hotel-stars": "4"}
    assert "hotel-stars" in issues[0].describe()


def test_stored_rows_integrate_with_empty_and_null_values_as_deletions():
    """The one integration serves the web's turn page: stored rows may say a slot is gone
    with ``none``, an empty or a null value, and a turn may have no state at all."""
    from judge.data import STORED_DELETIONS

    updates = [{"a": "1", "b": "2", "c": "3", "d": "4"}, None,
               {"a": "none", "b": None, "c": "", "d": "5"}, {}]
    states = cumulative_states(updates, none_values=STORED_DELETIONS)
    assert states[-1] == {"d": "5"} and states[1] == states[0]
    # by default only "none" deletes: an empty value is a value
    assert cumulative_states([{"a": "1"}, {"a": ""}])[-1] == {"a": ""}
