"""Slot names and values: one resolver for data, metrics and the judge's filters; the judge's
value comparisons use the metrics' matching; descriptions are punctuated for prompts."""

from __future__ import annotations

import pytest

from judge import MetricOptions, compute_metrics, load_dialogues, load_predictions
from judge.data import prompt_text
from judge.method import empty_rules
from judge.method._integrate import TurnInput, integrate_dialogue
from judge.metrics import same_value

from ..conftest import make_run


@pytest.mark.parametrize(("key", "slot"), [
    ("Taxi:departure", "taxi-departure"),
    ("Train.arrive by", "train-arriveby"),
    ("train . leave_at", "train-leaveat"),
    ("HOTEL - Book_Day", "hotel-book day"),
    ("hotel-bookday", "hotel-book day"),
    ("hotel-price range", "hotel-pricerange"),
    ("taxi departure", "taxi-departure"),
    ("restaurant-book.time", None),
    ("hotel-phone", None),
])
def test_resolve_slot(mini_schema, key, slot):
    assert mini_schema.resolve_slot(key) == slot


def test_multiwoz22_names_score_like_the_schema_names(tmp_path, mini_schema):
    gold = [[{"hotel-book day": "friday", "hotel-area": "north"}] * 2]
    written = [[{"hotel-bookday": "friday", "Hotel-Area": "north"}] * 2]
    d_path, p_path = make_run(tmp_path, gold, written)
    dialogues = load_dialogues(d_path, schema=mini_schema)
    predictions = load_predictions(p_path, dialogues, mini_schema)
    assert predictions.renamed == {"hotel-bookday -> hotel-book day": 2,
                                   "Hotel-Area -> hotel-area": 2}
    assert not predictions.out_of_schema
    report = compute_metrics(dialogues, predictions, mini_schema, MetricOptions())
    system = report.systems[0]
    assert system.metrics["jga"] == 100.0 and system.metrics["rule_tsa"]["2.1"] == 100.0
    assert system.inputs["renamed_slots"]["hotel-bookday -> hotel-book day"] == 2
    # the written names stay for --semantics paper, which judged them as the reference did
    turn = predictions.for_dialogue(dialogues.dialogues[0]).turns[0]
    assert turn.as_written()[0] == {"hotel-bookday": "friday", "Hotel-Area": "north"}


def test_judge_filters_canonicalise_and_match_values(mini_schema):
    turns = [
        TurnInput(0, {"taxi-destination": "saint johns college"}, {}, {}),
        # the judge says the user gave the same value again, spelled differently: no miss
        TurnInput(1, {}, {}, {"Taxi:destination": "Saint John's College",
                              "Train.arrive by": "10:00"}),
    ]
    default = integrate_dialogue(turns, mini_schema, empty_rules(), "default")
    assert default[1].missed == ["train-arriveby"]
    assert default[1].verdict is False
    paper = integrate_dialogue(turns, mini_schema, empty_rules(), "paper")
    assert paper[1].missed == []  # paper semantics drop the variants, as the reference did
    assert paper[1].verdict is True


def test_same_value():
    assert same_value("taxi-destination", "Saint John's College", "saint john s college")
    assert same_value("train-leaveat", "7pm", "19:00", frozenset({"train-leaveat"}))
    assert not same_value("hotel-area", "north", "south")


def test_prompt_text():
    assert prompt_text("The cabin seat option") == "The cabin seat option."
    assert prompt_text("Kind of attraction (museum, park ...).") == (
        "Kind of attraction (museum, park ...).")
    assert prompt_text("Timetables\n## Fake heading\n- item") == (
        "Timetables ## Fake heading - item.")
    assert prompt_text("  ") == "" and prompt_text(None) == ""
