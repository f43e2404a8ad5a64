"""Each metric family called directly on hand-made prepared dialogues, with every figure worked
out by hand in the comments: pooled sums over several turns and dialogues, each branch of
GCA's two loops more than once in a turn, FGA's carried errors, the matching policy's time
forms and sticky alternatives, RULE's turn states. Written where mutation testing found a
changed line that no test noticed (bench/mutation.py metrics)."""

from __future__ import annotations

import math

import pytest

from judge._errors import OptionError
from judge.metrics import (
    MatchPolicy,
    f1,
    loose_form,
    normalize_time,
    normalize_value,
    parse_policy,
    rule_policy,
    rule_verdicts,
    same_value,
)
from judge.metrics._dstc import fa_key
from judge.metrics._fga import fga_turn_marks, flexible_goal_accuracy
from judge.metrics._gca import (
    ChangeCounts,
    count_changes,
    gca_score,
    granular_change_accuracy,
    turn_changes,
)
from judge.metrics._joint import (
    average_goal_accuracy,
    final_turn_jga,
    joint_goal_accuracy,
    relative_slot_accuracy,
    slot_accuracy,
    slot_prf,
    turn_update_accuracy,
)
from judge.metrics._types import Prepared

AREA, STARS, DAY, LEAVE = "hotel-area", "hotel-stars", "train-day", "taxi-leaveat"

# Six turns in three dialogues (gold → predicted):
#   D1 t0 {area}              → {area}                  exact
#   D1 t1 {area, stars=4}     → {area, stars=3}          stars wrong
#   D1 t2 {area, stars, day}  → {area, stars, leave}     day missed, leave extra
#   D2 t0 {}                  → {}                       both empty
#   D2 t1 {day}               → {}                       day missed
#   D3 t0 {leave}             → {leave}                  exact
POOLED = [
    Prepared("D1", [{AREA: "n"}, {AREA: "n", STARS: "4"}, {AREA: "n", STARS: "4", DAY: "mon"}],
             [{AREA: "n"}, {AREA: "n", STARS: "3"}, {AREA: "n", STARS: "4", LEAVE: "5"}]),
    Prepared("D2", [{}, {DAY: "mon"}], [{}, {}]),
    Prepared("D3", [{LEAVE: "5"}], [{LEAVE: "5"}]),
]


def _domain(slot: str) -> str:
    return slot.split("-")[0]


# --- turn-pooled families (_joint) -----------------------------------------------------------

def test_jga_and_final_turn_jga_pool_turns_and_last_turns() -> None:
    # exact turns: D1 t0, D2 t0, D3 t0 = 3 of 6; last turns: only D3's of 3
    assert joint_goal_accuracy(POOLED) == 50.0
    assert final_turn_jga(POOLED) == pytest.approx(100 / 3)
    assert joint_goal_accuracy([]) is None and final_turn_jga([]) is None


def test_slot_accuracy_sums_every_turn() -> None:
    # mismatches per turn 0, 1, 2, 0, 1, 0 of K=4: (4+3+2+4+3+4) / 24
    assert slot_accuracy(POOLED, 4) == pytest.approx(100 * 20 / 24)
    # a wrong value counts once, not as a miss and an extra
    assert slot_accuracy([Prepared("d", [{AREA: "n"}], [{AREA: "s"}])], 2) == 50.0


def test_aga_per_turn_and_per_frame() -> None:
    # turns with gold: 1, 1/2, 2/3, 0, 1 → 19/6 over 5
    assert average_goal_accuracy(POOLED) == pytest.approx(100 * 19 / 30)
    # frames: hotel 1; hotel 1/2; hotel 1 and train 0; train 0; taxi 1 → 3.5 over 6
    assert average_goal_accuracy(POOLED, "frame", _domain) == pytest.approx(100 * 3.5 / 6)


def test_rsa_over_the_union_with_each_empty_turn_rule() -> None:
    # union shares 1, 1/2, 2/4, (empty), 0, 1 → 3.0
    assert relative_slot_accuracy(POOLED) == 50.0
    assert relative_slot_accuracy(POOLED, "skip") == 60.0
    assert relative_slot_accuracy(POOLED, "one") == pytest.approx(100 * 4 / 6)


def test_slot_prf_pools_pairs_over_turns() -> None:
    # gold pairs 1+2+3+0+1+1 = 8, predicted 1+2+3+0+0+1 = 7, right 1+1+2+0+0+1 = 5
    prf = slot_prf(POOLED)
    assert prf["precision"] == pytest.approx(100 * 5 / 7)
    assert prf["recall"] == pytest.approx(100 * 5 / 8)
    assert prf["f1"] == pytest.approx(100 * 2 / 3)  # 2·5 / (7 + 8)


def test_turn_update_accuracy_and_removals() -> None:
    # updates equal: D1 t0, D2 t0, D3 t0 (D1 t2: gold adds day, prediction fixes stars)
    assert turn_update_accuracy(POOLED) == 50.0
    dropped = [Prepared("d", [{AREA: "n"}, {AREA: "n"}], [{AREA: "n"}, {}])]
    # the prediction drops area at t1: no update on either side unless removals count
    assert turn_update_accuracy(dropped) == 100.0
    assert turn_update_accuracy(dropped, include_removals=True) == 50.0


def test_f1_of_percentages() -> None:
    assert f1(0.0, 0.0) == 0.0
    assert f1(50.0, 50.0) == 50.0
    assert f1(None, 50.0) is None and f1(50.0, None) is None


# --- GCA (_gca) ------------------------------------------------------------------------------

# Four turns built so that every branch of both loops runs, most of them twice in one turn
# ("-" marks a slot seen earlier and now absent, which GCA reads as "none"):
#   t0 gold a=1 b=2 c=3 x=1       pred a=1 b=9 e=5 f=6 y=1
#      gold loop: a C, b W, c M, x M; pred loop: e, f, y O       → C1 W1 O3 M2
#   t1 gold a b c d=4 g=7 (x-)    pred a b=2 e d=4 g=8 h=1 (f- y-)
#      gold loop: d C, g W, x C (pred never had x)
#      pred loop: b C (now right), h O, f C, y C (deleted, gold never had them) → C5 W1 O1 M0
#   t2 gold b=3 c g i=1 (a- d- x-) pred a d e h i=2 k=4 (b- f- y- g-)
#      gold loop: b W, i W, a O, d O (gold deleted, prediction kept)
#      pred loop: k O, b M, g M (prediction deleted what gold has) → C0 W2 O3 M2
#   t3 gold as t2                 pred a d e h i=3 k b=5
#      pred loop: i W, b W (changed to another wrong value)       → C0 W2 O0 M0
GCA_GOLD = [{"a": "1", "b": "2", "c": "3", "x": "1"},
            {"a": "1", "b": "2", "c": "3", "d": "4", "g": "7"},
            {"b": "3", "c": "3", "g": "7", "i": "1"},
            {"b": "3", "c": "3", "g": "7", "i": "1"}]
GCA_PRED = [{"a": "1", "b": "9", "e": "5", "f": "6", "y": "1"},
            {"a": "1", "b": "2", "e": "5", "d": "4", "g": "8", "h": "1"},
            {"a": "1", "d": "4", "e": "5", "h": "1", "i": "2", "k": "4"},
            {"a": "1", "d": "4", "e": "5", "h": "1", "i": "3", "k": "4", "b": "5"}]


def _cwom(counts: ChangeCounts) -> tuple[int, int, int, int]:
    return counts.C, counts.W, counts.O, counts.M


def test_gca_counts_turn_by_turn_through_every_branch() -> None:
    turns = [_cwom(c) for c in turn_changes(GCA_GOLD, GCA_PRED)]
    assert turns == [(1, 1, 3, 2), (5, 1, 1, 0), (0, 2, 3, 2), (0, 2, 0, 0)]
    assert _cwom(count_changes(GCA_GOLD, GCA_PRED)) == (6, 6, 7, 4)


def test_gca_dedupe_skips_slots_the_gold_loop_counted_and_goes_on() -> None:
    # t0: a and b are skipped, e f y still counted; t2: b's deletion (already W) not counted
    # again as M, but g's is, and k after the skipped i is still O
    turns = [_cwom(c) for c in turn_changes(GCA_GOLD, GCA_PRED, dedupe=True)]
    assert turns == [(1, 1, 3, 2), (5, 1, 1, 0), (0, 2, 3, 1), (0, 2, 0, 0)]
    assert _cwom(count_changes(GCA_GOLD, GCA_PRED, dedupe=True)) == (6, 6, 7, 3)


def test_gca_none_word_is_the_deletion_marker() -> None:
    """An explicit deletion value equals the marker GCA writes for a vanished slot."""
    gold, pred = [{"a": "1"}, {"a": "none"}], [{"a": "1"}, {}]
    # t0 a C; t1 gold deletes a and the prediction dropped it: C in the gold loop, and the
    # prediction's deletion again in its own loop (M: the reference counts it twice)
    assert _cwom(count_changes(gold, pred)) == (2, 0, 0, 1)
    assert [_cwom(c) for c in turn_changes(gold, pred)] == [(1, 0, 0, 0), (1, 0, 0, 1)]
    dashed = [Prepared("d", [{"a": "1"}, {"a": "-"}], [{"a": "1"}, {}])]
    assert granular_change_accuracy(dashed, none="-")["counts"] == {"C": 2, "W": 0, "O": 0,
                                                                     "M": 1}
    # under the default marker "-" is a value: gold changes a to it (W), the prediction
    # deletes a (M)
    assert granular_change_accuracy(dashed)["counts"] == {"C": 1, "W": 1, "O": 0, "M": 1}


def test_change_counts_add() -> None:
    total = ChangeCounts(1, 2, 3, 4)
    total.add(ChangeCounts(10, 20, 30, 40))
    assert _cwom(total) == (11, 22, 33, 44)


def test_gca_score_parts_and_weighted_harmonic_mean() -> None:
    # C6 W6 O7 M4: predicted changes 19, gold changes 16
    score = gca_score(ChangeCounts(6, 6, 7, 4))
    assert score["vp"] == pytest.approx(100 * 6 / 19)
    assert score["vr"] == pytest.approx(100 * 6 / 16)
    assert score["lp"] == pytest.approx(100 * 12 / 19)
    assert score["lr"] == pytest.approx(100 * 12 / 16)
    # weights a·19, a·16, (1-a)·19, (1-a)·16 (sum 35); Σ w/x = 617/12 · (1 + a), a = 10/11
    assert score["gca"] == pytest.approx(100 * 35 / (617 / 12 * 21 / 11))
    assert score["counts"] == {"C": 6, "W": 6, "O": 7, "M": 4}
    pooled = granular_change_accuracy([Prepared("d", GCA_GOLD, GCA_PRED)])
    assert pooled["gca"] == pytest.approx(score["gca"])
    # nothing predicted: precision parts undefined (null) or zero
    missed = gca_score(ChangeCounts(0, 0, 0, 2), undefined="null")
    assert (missed["vp"], missed["lp"], missed["vr"], missed["lr"]) == (None, None, 0.0, 0.0)
    assert missed["gca"] is None
    assert gca_score(ChangeCounts(0, 0, 0, 2))["gca"] == 0.0


# --- FGA (_fga) ------------------------------------------------------------------------------

def test_fga_marks_carry_an_error_and_count_from_it() -> None:
    gold = [{"a": "1"}, {"a": "1", "b": "2"}, {"a": "1", "b": "2"},
            {"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "2", "c": "3"}]
    pred = [{"a": "1"}, {"a": "1", "b": "9"}, {"a": "1", "b": "9"},
            {"a": "1", "b": "9", "c": "3"}, {"a": "1", "b": "2", "c": "3"}]
    # exact; the turn's own error; carried 1 and 2 turns after it; exact again
    assert fga_turn_marks(gold, pred) == [-1, 0, 1, 2, -1]
    scores, turn_match = flexible_goal_accuracy([Prepared("d", gold, pred)], [0.5, 1.0])
    assert scores["0.5"] == pytest.approx(
        100 * (2 + (1 - math.exp(-0.5)) + (1 - math.exp(-1.0))) / 5)
    assert scores["1.0"] == pytest.approx(
        100 * (2 + (1 - math.exp(-1.0)) + (1 - math.exp(-2.0))) / 5)
    assert turn_match == 80.0


def test_fga_a_dropped_slot_after_a_right_turn_is_the_turns_own_error() -> None:
    # the states agreed at t0, so t1's difference is t1's error even though no slot changed
    # in either turn update (a removal is no update)
    assert fga_turn_marks([{"a": "1"}, {"a": "1"}], [{"a": "1"}, {}]) == [-1, 0]


# --- value matching (_matching) --------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("12pm", "12:00"), ("12am", "00:00"), ("1am", "01:00"), ("7am", "07:00"),
    ("11pm", "23:00"), ("7:59pm", "19:59"), ("7.30pm", "19:30"), ("5 p.m.", "17:00"),
    ("13pm", "13pm"), ("0am", "0am"), ("7:60pm", "7:60pm"),
    ("23:59", "23:59"), ("9:30", "09:30"), ("0930", "09:30"),
    ("2400", "2400"), ("24:00", "24:00"), ("0960", "0960"), ("9:60", "9:60"), ("noon", "noon"),
])
def test_normalize_time_forms_and_their_limits(value: str, expected: str) -> None:
    assert normalize_time(value) == expected


def test_normalize_value_steps() -> None:
    times = frozenset({"train-leaveat"})
    assert normalize_value("train-leaveat", "  7PM ", times) == "19:00"
    assert normalize_value("train-day", "  7PM ", times) == "7pm"
    assert normalize_value("hotel-type", "The  Guesthouse") == "guest house"
    assert normalize_value("hotel-parking", "Free") == "yes"
    assert normalize_value("hotel-name", "free") == "free"


def test_loose_form_and_same_value() -> None:
    assert loose_form("attraction-name", "Saint John's College") == "saintjohnscollege"
    assert loose_form("attraction-name", "saint john s college") == "saintjohnscollege"
    assert loose_form("restaurant-name", "Cote, Bistro!") == "cotebistro"
    assert same_value("attraction-name", "Saint John's College", "saint johns college")
    assert same_value("hotel-parking", "free", "yes")
    assert not same_value("hotel-name", "free", "yes")
    assert same_value("train-leaveat", "7pm", "19:00", frozenset({"train-leaveat"}))
    assert not same_value("train-leaveat", "7pm", "19:00")
    assert same_value("x-y", "same", "same")


def test_policy_normalises_with_the_slot() -> None:
    nospace = parse_policy("nospace")
    assert nospace.normalize("hotel-name", "a b c") == "abc"
    times = parse_policy("normalized+alternatives", time_slots=["train-leaveat"])
    assert times.alternatives_of("train-leaveat", "7pm|8pm") == ["19:00", "20:00"]
    assert times.alternatives_of("train-leaveat", "7pm") == ["19:00"]
    assert times.matches("train-leaveat", "7pm", "19:00")
    assert not times.matches("train-day", "7pm", "19:00")


def test_prepare_resolves_alternatives_sticky_then_first() -> None:
    policy = parse_policy("exact+alternatives")
    gold = [{"a": "x|y"}, {"a": "x|y"}, {"b": "p|q"}]
    pred = [{"a": "y"}, {"a": "z"}, {"b": "z"}]
    g, p = policy.prepare(gold, pred)
    # t0: the prediction's alternative; t1: still t0's choice; t2: the first alternative
    assert g == [{"a": "y"}, {"a": "y"}, {"b": "p"}]
    assert p == pred


def test_prepare_normalises_gold_with_its_slot_and_drops_none_only() -> None:
    policy = parse_policy("normalized+alternatives", time_slots=["train-leaveat"])
    g, p = policy.prepare([{"train-leaveat": "7pm|19:15", "hotel-area": "none",
                            "hotel-name": "The Place"}],
                          [{"train-leaveat": "19:00", "hotel-stars": "none"}])
    assert g == [{"train-leaveat": "19:00", "hotel-name": "place"}]
    assert p == [{"train-leaveat": "19:00"}]
    kept, _ = policy.prepare([{"hotel-area": "none", "hotel-name": "x"}], [{}], keep_none=True)
    assert kept == [{"hotel-area": "none", "hotel-name": "x"}]


# --- RULE (_rule) ----------------------------------------------------------------------------

def test_rule_verdicts_ignore_none_pairs_only_when_asked() -> None:
    policy = parse_policy("exact+alternatives")
    gold = [{"a": "1"}]
    pred = [{"a": "1", "b": "none"}]
    assert rule_verdicts(gold, pred, policy) == [False]
    assert rule_verdicts(gold, pred, policy, ignore_none_pairs=True) == [True]


def test_rule_verdicts_alternatives_keep_a_shared_value_unchanged() -> None:
    gold = [{"a": "x|y"}, {"a": "y|z"}]
    pred = [{"a": "x"}, {}]
    # with alternatives the gold turn state of t1 is empty (y is shared): nothing to say
    assert rule_verdicts(gold, pred, parse_policy("exact+alternatives")) == [True, True]
    # without, t1's gold turn state is the changed value, which the prediction lacks
    assert rule_verdicts(gold, pred, parse_policy("exact")) == [False, False]


def test_rule_policy_follows_the_schema(mini_schema) -> None:
    policy, ignore = rule_policy("normalized+alternatives", mini_schema)
    assert isinstance(policy, MatchPolicy)
    assert policy.name == "normalized+alternatives" and ignore is False
    assert policy.time_slots == mini_schema.time_slots
    assert policy.separator == mini_schema.multi_value_separator
    assert policy.matches("train-leaveat", "7pm|8pm", "20:00")
    nospace, ignore = rule_policy("nospace", mini_schema)
    assert nospace.name == "nospace+alternatives" and ignore is True


def test_fa_key_names_an_operating_point() -> None:
    assert fa_key(0.05) == "05"
    assert fa_key(0.2) == "20"
    assert fa_key(0.125) == "12p5"


def test_parse_policy_refuses_unknown_or_empty_and_keeps_the_separator() -> None:
    with pytest.raises(OptionError, match=(
            r"unknown matching policy 'exact\+bogus'; choose from exact, nospace, normalized, "
            r"alternatives \(combine with '\+', e\.g\. normalized\+alternatives\)")):
        parse_policy("exact+bogus")
    with pytest.raises(OptionError, match="unknown matching policy ''"):
        parse_policy("")
    policy = parse_policy(" Normalized + alternatives ", separator="/")
    assert (policy.name, policy.separator, policy.steps) == (
        "normalized+alternatives", "/", ("normalized",))
    assert policy.alternatives_of("hotel-area", "North/South") == ["north", "south"]


def test_prepare_normalises_a_plain_gold_value_with_its_slot() -> None:
    policy = parse_policy("normalized", time_slots=["train-leaveat"])
    g, _ = policy.prepare([{"train-leaveat": "7pm", "train-day": "7pm"}], [{}])
    assert g == [{"train-leaveat": "19:00", "train-day": "7pm"}]
