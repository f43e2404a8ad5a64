"""Rule filters and result integration under both semantics (METHOD.md section 4)."""

from __future__ import annotations

from typing import Any

import pytest

from judge.errors import OptionError
from judge.method import (
    Totals,
    TurnInput,
    TurnVerdict,
    agreement,
    integrate_dialogue,
    totals,
)

BOTH = ("default", "paper")


@pytest.fixture
def run(mini_schema, rules):
    """``run(semantics, turn, turn, ...)`` where a turn is ``(pred, incorrect, missed)``."""

    def go(semantics: str, *turns: tuple | TurnInput) -> list[TurnVerdict]:
        inputs = [t if isinstance(t, TurnInput) else TurnInput(i, *t)
                  for i, t in enumerate(turns)]
        return integrate_dialogue(inputs, mini_schema, rules, semantics)  # type: ignore[arg-type]

    return go


def entry(verdict: TurnVerdict, step: str, key: str) -> dict[str, Any]:
    """The one trace entry of ``step`` about ``key``."""
    hits = [e for e in verdict.trace if e["step"] == step and e["key"] == key]
    assert len(hits) == 1, verdict.trace
    return hits[0]


# --- filter 1: accuracy keys --------------------------------------------------------------------


@pytest.mark.parametrize("semantics", BOTH)
def test_accuracy_key_not_in_turn_state_is_dropped(run, semantics):
    [v] = run(semantics, ({"hotel-area": "north"}, {"hotel-name": "acorn"}, {}))
    assert v.verdict is True
    assert v.incorrect == []
    e = entry(v, "accuracy", "hotel-name")
    assert e["decision"] == "dropped"
    assert "not in the predicted turn state" in e["reason"]
    assert entry(v, "prediction", "hotel-area")["decision"] == "kept"


@pytest.mark.parametrize("semantics", BOTH)
def test_accuracy_key_in_turn_state_is_kept(run, semantics):
    [v] = run(semantics, ({"hotel-area": "north"}, {"hotel-area": "north"}, {}))
    assert v.verdict is False
    assert v.incorrect == ["hotel-area"]
    assert v.state_incorrect == ["hotel-area"]
    assert v.state_correct == {}
    assert entry(v, "accuracy", "hotel-area")["decision"] == "kept"
    assert entry(v, "prediction", "hotel-area")["decision"] == "dropped"


def test_accuracy_case_variant_kept_in_default_dropped_in_paper(run):
    turn = ({"hotel-pricerange": "cheap"}, {"Hotel-Price Range": "cheap"}, {})
    [default] = run("default", turn)
    assert default.verdict is False
    assert default.incorrect == ["hotel-pricerange"]
    assert entry(default, "accuracy", "Hotel-Price Range")["slot"] == "hotel-pricerange"
    [paper] = run("paper", turn)
    assert paper.verdict is True
    assert paper.incorrect == []
    assert entry(paper, "accuracy", "Hotel-Price Range")["decision"] == "dropped"
    assert paper.state_correct == {"hotel-pricerange": "cheap"}


def test_accuracy_out_of_schema_key_traced_in_default(run):
    [v] = run("default", ({"hotel-area": "north"}, {"hotel-phone": "0123"}, {}))
    assert v.verdict is True
    e = entry(v, "accuracy", "hotel-phone")
    assert e["decision"] == "dropped" and e["slot"] is None
    assert "no schema slot" in e["reason"]


def test_accuracy_matches_canonicalised_prediction_in_default(run):
    [v] = run("default", ({"Hotel-Area": "north"}, {"hotel-area": "north"}, {}))
    assert v.verdict is False
    assert v.incorrect == ["hotel-area"]


# --- filter 2: missed keys ----------------------------------------------------------------------


@pytest.mark.parametrize("semantics", BOTH)
def test_missed_key_out_of_schema_dropped(run, semantics):
    [v] = run(semantics, ({}, {}, {"hotel-phone": "0123"}))
    assert v.verdict is True
    assert v.missed == []
    e = entry(v, "completeness", "hotel-phone")
    assert e["decision"] == "dropped" and e["slot"] is None


def test_missed_naming_variant_kept_in_default_dropped_in_paper(run):
    turn = ({}, {}, {"Hotel-Price Range": "cheap"})
    [default] = run("default", turn)
    assert default.verdict is False
    assert default.missed == ["hotel-pricerange"]
    assert default.state_missed == ["hotel-pricerange"]
    [paper] = run("paper", turn)
    assert paper.verdict is True
    # The paper lowercases the response first, so the trace shows the lowercased key.
    assert entry(paper, "completeness", "hotel-price range")["decision"] == "dropped"


def test_missed_upper_case_key_lowercased_in_paper(run):
    [paper] = run("paper", ({}, {}, {"HOTEL-AREA": "North"}))
    assert paper.missed == ["hotel-area"]
    assert entry(paper, "completeness", "hotel-area")["value"] == "north"


@pytest.mark.parametrize("semantics", BOTH)
def test_missed_key_in_turn_state_dropped(run, semantics):
    [v] = run(semantics, ({"hotel-area": "north"}, {}, {"hotel-area": "north"}))
    assert v.verdict is True
    assert v.missed == []
    assert "in the predicted turn state" in entry(v, "completeness", "hotel-area")["reason"]


@pytest.mark.parametrize("semantics", BOTH)
def test_missed_already_correct_same_value_dropped(run, semantics):
    v0, v1 = run(semantics,
                 ({"hotel-area": "north"}, {}, {}),
                 ({}, {}, {"hotel-area": "north"}))
    assert v0.state_correct == {"hotel-area": "north"}
    assert v1.verdict is True
    assert v1.missed == []
    assert "already judged correct" in entry(v1, "completeness", "hotel-area")["reason"]


def test_missed_already_correct_same_value_case_insensitive_in_default(run):
    _, v1 = run("default", ({"hotel-area": "north"}, {}, {}), ({}, {}, {"hotel-area": " North"}))
    assert v1.verdict is True


def test_missed_already_correct_different_value(run):
    turns = (({"hotel-area": "north"}, {}, {}), ({}, {}, {"hotel-area": "south"}))
    _, default = run("default", *turns)
    assert default.verdict is False
    assert default.missed == ["hotel-area"]
    assert default.state_missed == ["hotel-area"]
    assert default.jga is False
    assert "changed" in entry(default, "completeness", "hotel-area")["reason"]
    _, paper = run("paper", *turns)
    assert paper.verdict is True
    assert paper.missed == []
    assert entry(paper, "completeness", "hotel-area")["decision"] == "dropped"


@pytest.mark.parametrize("value", ["", "none", "None", None, []])
def test_missed_blank_values(run, value):
    turn = ({}, {}, {"hotel-area": value})
    [default] = run("default", turn)
    assert default.verdict is True
    e = entry(default, "completeness", "hotel-area")
    assert e["decision"] == "dropped" and "empty" in e["reason"]
    # The reference implementation never looked at missed values.
    [paper] = run("paper", turn)
    assert paper.verdict is False
    assert paper.missed == ["hotel-area"]


def test_missed_number_value_compared_as_text(run):
    turns = (({"hotel-book people": "2"}, {}, {}), ({}, {}, {"hotel-book people": 2}))
    _, v1 = run("default", *turns)
    assert v1.verdict is True


@pytest.mark.parametrize("semantics", BOTH)
def test_missed_slot_leaves_missed_when_predicted_later(run, semantics):
    v0, v1 = run(semantics,
                 ({}, {}, {"hotel-area": "north"}),
                 ({"hotel-area": "north"}, {}, {}))
    assert v0.state_missed == ["hotel-area"]
    assert v1.verdict is True
    assert v1.state_missed == []
    assert v1.state_correct == {"hotel-area": "north"}


# --- filter 3: predicted pairs ------------------------------------------------------------------


@pytest.mark.parametrize("semantics", BOTH)
def test_out_of_schema_predicted_slot(run, semantics):
    v0, v1 = run(semantics,
                 ({"hotel-phone": "0123", "hotel-area": "north"}, {}, {}),
                 ({}, {}, {}))
    assert v0.verdict is False
    assert v0.state_incorrect == ["hotel-phone"]
    assert v0.state_correct == {"hotel-area": "north"}
    assert "not in the schema" in entry(v0, "prediction", "hotel-phone")["reason"]
    assert v1.verdict is True
    assert v1.jga is False  # the slot stays outstanding


def test_predicted_naming_variant_is_in_schema_only_in_default(run):
    [default] = run("default", ({"Hotel-Area": "north"}, {}, {}))
    assert default.verdict is True
    assert default.state_correct == {"hotel-area": "north"}
    [paper] = run("paper", ({"Hotel-Area": "north"}, {}, {}))
    assert paper.verdict is False
    assert paper.state_incorrect == ["Hotel-Area"]


@pytest.mark.parametrize("semantics", BOTH)
def test_redundant_pair(run, semantics):
    v0, v1 = run(semantics,
                 ({"hotel-area": "north"}, {}, {}),
                 ({"hotel-area": "north", "hotel-stars": "4"}, {}, {}))
    assert v0.verdict is True
    assert v1.verdict is False
    assert "redundant" in entry(v1, "prediction", "hotel-area")["reason"]
    assert v1.state_incorrect == []  # redundancy spoils the turn, not the state
    assert v1.jga is True  # nothing outstanding, whenever it is read
    assert v1.state_correct == {"hotel-area": "north", "hotel-stars": "4"}


def test_redundant_comparison_case(run):
    turns = (({"hotel-area": "north"}, {}, {}), ({"hotel-area": "North"}, {}, {}))
    assert run("default", *turns)[1].verdict is False
    paper = run("paper", *turns)[1]
    assert paper.verdict is True
    assert paper.state_correct == {"hotel-area": "North"}


@pytest.mark.parametrize(("value", "default_ok", "paper_ok"), [
    ("0", False, False), ("20", False, False), ("2", True, True),
    ("dontcare", True, False), ("none", True, False),
])
def test_numeric_rule(run, value, default_ok, paper_ok):
    for semantics, ok in (("default", default_ok), ("paper", paper_ok)):
        [v] = run(semantics, ({"hotel-book people": value}, {}, {}))
        assert v.verdict is ok, (value, semantics)
        e = entry(v, "prediction", "hotel-book people")
        assert (e["decision"] == "kept") is ok
        if not ok:
            assert e["reason"].startswith("value rule")
            assert v.state_correct == {}


def test_stars_rule(run):
    [v] = run("default", ({"hotel-stars": "6"}, {}, {}))
    assert v.verdict is False


# --- integration --------------------------------------------------------------------------------


def test_jga_timing_first_turn(run):
    turns = (({}, {}, {"hotel-area": "north"}), ({"hotel-area": "north"}, {}, {}))
    paper = run("paper", *turns)
    assert [v.jga for v in paper] == [True, False]  # turn 0 always counts; read before
    default = run("default", *turns)
    assert [v.jga for v in default] == [False, True]  # read after


def test_jga_timing_last_turn_error(run):
    turns = (({"hotel-area": "north"}, {}, {}), ({"hotel-stars": "4"}, {"hotel-stars": "4"}, {}))
    paper = run("paper", *turns)
    assert [v.verdict for v in paper] == [True, False]
    assert [v.jga for v in paper] == [True, True]  # the last turn's error never counts
    default = run("default", *turns)
    assert [v.jga for v in default] == [True, False]


def test_incorrect_sticky_in_paper_cleared_in_default(run):
    turns = (
        ({"hotel-area": "north"}, {"hotel-area": "north"}, {}),
        ({"hotel-area": "centre"}, {}, {}),
        ({}, {}, {}),
    )
    paper = run("paper", *turns)
    assert [v.verdict for v in paper] == [False, True, True]
    assert paper[1].state_incorrect == ["hotel-area"]
    assert paper[1].state_correct == {}
    assert "outstanding" in entry(paper[1], "prediction", "hotel-area")["reason"]
    assert [v.jga for v in paper] == [True, False, False]

    default = run("default", *turns)
    assert [v.verdict for v in default] == [False, True, True]
    assert default[1].state_incorrect == []
    assert default[1].state_correct == {"hotel-area": "centre"}
    assert "clears" in entry(default[1], "prediction", "hotel-area")["reason"]
    assert [v.jga for v in default] == [False, True, True]


def test_flagged_again_is_not_cleared_in_default(run):
    turns = (
        ({"hotel-area": "north"}, {"hotel-area": "north"}, {}),
        ({"hotel-area": "centre"}, {"hotel-area": "centre"}, {}),
    )
    default = run("default", *turns)
    assert default[1].state_incorrect == ["hotel-area"]
    assert default[1].jga is False


@pytest.mark.parametrize("semantics", BOTH)
def test_error_turn(run, semantics):
    turns = (
        ({"hotel-area": "north"}, {}, {}),
        TurnInput(1, {"hotel-stars": "4"}, None, None, error="HTTP 500 after 3 attempts"),
        ({"hotel-stars": "4"}, {}, {}),
        ({}, {}, {}),
    )
    verdicts = run(semantics, *turns)
    assert [v.verdict for v in verdicts] == [True, None, True, True]
    err = verdicts[1]
    assert err.trace == [{"step": "error", "key": None, "slot": None, "value": None,
                          "decision": "dropped",
                          "reason": "turn not scored: HTTP 500 after 3 attempts"}]
    assert err.state_correct == verdicts[0].state_correct == {"hotel-area": "north"}
    assert err.incorrect == [] and err.missed == []
    if semantics == "paper":
        assert [v.jga for v in verdicts] == [True, True, None, None]
    else:
        assert [v.jga for v in verdicts] == [True, None, None, None]


@pytest.mark.parametrize("semantics", BOTH)
def test_missing_results(run, semantics):
    # Accuracy is not asked about an empty turn state: None there is not an error.
    [v] = run(semantics, ({}, None, {}))
    assert v.verdict is True
    [v] = run(semantics, ({"hotel-area": "north"}, None, {}))
    assert v.verdict is None
    assert "accuracy" in v.trace[0]["reason"]
    [v] = run(semantics, ({}, {}, None))
    assert v.verdict is None
    assert "completeness" in v.trace[0]["reason"]


def test_trace_records_every_decision(run):
    [v] = run("default", (
        {"hotel-area": "north", "hotel-stars": "4"},
        {"Hotel-Stars": 4, "hotel-name": "x"},
        {"train-day": "monday", "hotel-phone": "1"},
    ))
    assert v.verdict is False
    assert v.incorrect == ["hotel-stars"]
    assert v.missed == ["train-day"]
    decisions = {(e["step"], e["key"]): e["decision"] for e in v.trace}
    assert decisions == {
        ("accuracy", "Hotel-Stars"): "kept",
        ("accuracy", "hotel-name"): "dropped",
        ("completeness", "train-day"): "kept",
        ("completeness", "hotel-phone"): "dropped",
        ("prediction", "hotel-area"): "kept",
        ("prediction", "hotel-stars"): "dropped",
    }
    assert entry(v, "accuracy", "Hotel-Stars")["value"] == 4
    assert v.state_incorrect == ["hotel-stars"]
    assert v.state_missed == ["train-day"]
    assert v.state_correct == {"hotel-area": "north"}


def test_unknown_semantics(mini_schema, rules):
    with pytest.raises(OptionError):
        integrate_dialogue([], mini_schema, rules, "strict")  # type: ignore[arg-type]


# --- totals and agreement -----------------------------------------------------------------------


def verdict(value: bool | None, jga: bool | None) -> TurnVerdict:
    return TurnVerdict(turn_index=0, verdict=value, jga=jga, trace=[])


def test_totals_arithmetic():
    result = totals([verdict(True, True), verdict(False, False), verdict(True, None),
                     verdict(None, None), verdict(True, True)])
    assert result == Totals(turns=5, scored=4, errors=1, tsa=75.0, jga_turns=3,
                            judge_jga=pytest.approx(200 / 3))


def test_totals_nothing_scored():
    assert totals([verdict(None, None)]) == Totals(turns=1, scored=0, errors=1, tsa=None,
                                                   jga_turns=0, judge_jga=None)
    assert totals([]).tsa is None


def test_totals_from_integration(run):
    verdicts = run("default", ({"hotel-area": "north"}, {}, {}),
                   ({"hotel-stars": "9"}, {}, {}))
    result = totals(verdicts)
    assert (result.scored, result.tsa, result.judge_jga) == (2, 50.0, 100.0)


def test_agreement_arithmetic():
    assert agreement([True, False, None, True], [True, True, False, True]) == pytest.approx(
        200 / 3)
    assert agreement([None, None], [True, False]) is None
    assert agreement([False], [False]) == 100.0
    with pytest.raises(ValueError):
        agreement([True], [True, False])
