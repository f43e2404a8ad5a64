"""A loaded test set keeps one object per distinct gold value and one state where the
annotation versions agree: the states repeat turn after turn and version after version."""

from __future__ import annotations

from judge.data import load_dialogues, load_schema

from ..conftest import EXAMPLES, write_jsonl


def test_agreeing_versions_share_one_state_and_values_one_string(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"dialogue_id": "D1", "turns": [
        {"turn_index": 0, "user": "a cheap hotel",
         "gold_state_21": {"hotel-pricerange": "cheap"},
         "gold_state_24": {"hotel-pricerange": "cheap"}},
        {"turn_index": 1, "user": "in the north",
         "gold_state_21": {"hotel-pricerange": "cheap", "hotel-area": "north"},
         "gold_state_24": {"hotel-pricerange": "cheap", "hotel-area": "east"}}]}])
    for schema in (None, load_schema(EXAMPLES / "schema.json")):
        first, second = load_dialogues(path, schema=schema).dialogues[0].turns
        assert first.gold_states["2.1"] is first.gold_states["2.4"]
        assert second.gold_states["2.1"] is not second.gold_states["2.4"]
        assert second.gold_states == {"2.1": {"hotel-pricerange": "cheap", "hotel-area": "north"},
                                      "2.4": {"hotel-pricerange": "cheap", "hotel-area": "east"}}
        assert (first.gold_states["2.1"]["hotel-pricerange"]
                is second.gold_states["2.4"]["hotel-pricerange"])


def test_gold_values_of_different_dialogues_are_one_string(tmp_path):
    dialogues = load_dialogues(write_jsonl(tmp_path / "d.jsonl", [
        {"dialogue_id": f"D{n}", "turns": [{"turn_index": 0, "user": "a cheap hotel",
                                            "gold_state_21": {"hotel-name": "the " + "acorn"}}]}
        for n in (1, 2)]))
    one, two = (d.turns[0].gold_states["2.1"]["hotel-name"] for d in dialogues.dialogues)
    assert one == "the acorn" and one is two
