"""DSTC scored-hypothesis metrics on small fixtures whose figures are computed by hand."""

from __future__ import annotations

import math

import pytest

from judge.metrics import parse_policy
from judge.metrics._dstc import scored_hypothesis_metrics
from judge.metrics._types import HypDialogue

EXACT = parse_policy("exact")
ALTERNATIVES = parse_policy("alternatives")


def slot_dialogue(gold, slot_hyps, dialogue_id="d1"):
    """A dialogue with per-slot lists only."""
    return HypDialogue(dialogue_id, gold, slot_hyps, [None] * len(gold))


def one_turn(gold, hyps, slot="area", policy=EXACT):
    """Schedule-1 metrics of ``slot`` for a single turn with one slot list."""
    result = scored_hypothesis_metrics([slot_dialogue([gold], [{slot: hyps}])], policy, [slot])
    return result["schedule1"]["slots"][slot]


def test_single_slot_by_hand():
    dialogue = slot_dialogue(
        [{"area": "north"}, {"area": "north"}],
        [{"area": [("south", 0.5), ("north", 0.3)]}, {"area": [("north", 0.9)]}],
    )
    result = scored_hypothesis_metrics([dialogue], EXACT, ["area"])
    m = result["schedule1"]["slots"]["area"]
    # Turn 0: sum 0.8 -> REST 0.2 (wrong: "north" is listed). Sorted: south .5, north .3, REST .2.
    #   top wrong; p = .3; L2 = (1-.3)^2 + .5^2 + .2^2 = .49 + .25 + .04 = .78; rank 2.
    # Turn 1: REST 0.1 (wrong). Sorted: north .9, REST .1.
    #   top right; p = .9; L2 = (1-.9)^2 + .1^2 = .02; rank 1.
    assert m["n"] == 2
    assert m["accuracy"] == pytest.approx(50.0)  # (0 + 1) / 2
    assert m["l2"] == pytest.approx(0.4)  # (.78 + .02) / 2
    assert m["avgp"] == pytest.approx(60.0)  # (.3 + .9) / 2
    assert m["neglogp"] == pytest.approx((-math.log(0.3) - math.log(0.9)) / 2)
    assert m["mrr"] == pytest.approx(75.0)  # (1/2 + 1) / 2
    # ROC samples (top correct, top score): (F, .5), (T, .9); N = 2, one correct, one wrong.
    # V1 sweep: nothing -> FA 0, FR 1/2; tau .9 -> CA 1/2, FA 0, FR 0; tau .5 -> FA 1/2, FR 0.
    #   |FA - FR| is smallest (0) at tau .9 -> EER 0; CA at FA <= 5/10/20 % is 1/2.
    assert m["roc_v1_eer"] == pytest.approx(0.0)
    assert m["roc_v1_ca05"] == m["roc_v1_ca10"] == m["roc_v1_ca20"] == pytest.approx(50.0)
    # V2: tau .9 -> CA 1/1, FA 0/1, FR 0 -> EER 0, CA 100 at every FA point.
    assert m["roc_v2_eer"] == pytest.approx(0.0)
    assert m["roc_v2_ca05"] == m["roc_v2_ca10"] == m["roc_v2_ca20"] == pytest.approx(100.0)
    assert set(m) == {
        "n", "accuracy", "l2", "avgp", "neglogp", "mrr",
        "roc_v1_eer", "roc_v1_ca05", "roc_v1_ca10", "roc_v1_ca20",
        "roc_v2_eer", "roc_v2_ca05", "roc_v2_ca10", "roc_v2_ca20",
    }
    assert result["schedule1"]["slot_mean"] == m
    # Schedule 3 keeps turn 1 only: all tops are correct, so V2 (needs a wrong top) is None.
    last = result["schedule3"]["slots"]["area"]
    assert last["n"] == 1
    assert last["l2"] == pytest.approx(0.02)
    assert last["roc_v1_eer"] == pytest.approx(0.0)  # tau .9: FA 0, FR 0
    assert last["roc_v1_ca05"] == pytest.approx(100.0)
    assert last["roc_v2_eer"] is None
    assert last["roc_v2_ca05"] is None
    assert result["schedule1"]["joint"] is None
    assert any("joint" in note for note in result["notes"])


def test_scores_summing_above_one_are_rescaled():
    m = one_turn({"food": "thai"}, [("thai", 0.9), ("indian", 0.6)], slot="food")
    # Sum 1.5 -> thai .6, indian .4, no REST. L2 = (1-.6)^2 + .4^2 = .32.
    assert m["accuracy"] == pytest.approx(100.0)
    assert m["avgp"] == pytest.approx(60.0)
    assert m["l2"] == pytest.approx(0.32)
    assert m["neglogp"] == pytest.approx(-math.log(0.6))
    assert m["mrr"] == pytest.approx(100.0)


def test_rest_is_correct_when_gold_lacks_the_slot():
    m = one_turn({"food": "thai"}, [("north", 0.6)])
    # Sorted: north .6 (wrong), REST .4 (right). L2 = (1-.4)^2 + .6^2 = .72.
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["avgp"] == pytest.approx(40.0)
    assert m["l2"] == pytest.approx(0.72)
    assert m["mrr"] == pytest.approx(50.0)
    # An empty list on a filled gold slot is never right: REST is wrong, the answer is absent.
    m = one_turn({"area": "north"}, [])
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["mrr"] == pytest.approx(0.0)
    assert m["l2"] == pytest.approx(2.0)  # (1 - 0)^2 + REST 1^2
    # No list at all: REST takes the whole mass and is right.
    m = one_turn({}, [])
    assert m["accuracy"] == pytest.approx(100.0)
    assert m["avgp"] == pytest.approx(100.0)
    assert m["l2"] == pytest.approx(0.0)
    assert m["neglogp"] == pytest.approx(0.0)


def test_rest_with_zero_score_is_absent():
    m = one_turn({}, [("north", 0.7), ("south", 0.3)])
    # Sum 1 -> no REST, so the right answer (REST) is missing: p = 0.
    # L2 = (1-0)^2 + .7^2 + .3^2 = 1.58.
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["avgp"] == pytest.approx(0.0)
    assert m["mrr"] == pytest.approx(0.0)
    assert m["l2"] == pytest.approx(1.58)
    assert m["neglogp"] == pytest.approx(-math.log(1e-4))
    # 0.7 + 0.2 + 0.1 is 0.9999999999999999 in floats; that is not a REST hypothesis.
    m = one_turn({}, [("north", 0.7), ("south", 0.2), ("east", 0.1)])
    assert m["mrr"] == pytest.approx(0.0)
    assert m["neglogp"] == pytest.approx(-math.log(1e-4))


def test_alternatives_policy():
    gold = {"time": "7pm|19:00"}
    hyps = [("19:00", 0.8)]
    m = one_turn(gold, hyps, slot="time", policy=ALTERNATIVES)
    assert m["accuracy"] == pytest.approx(100.0)
    assert m["avgp"] == pytest.approx(80.0)
    # Under exact matching "19:00" is wrong, and REST (.2) is wrong too because the gold has a
    # value: the correct hypothesis is absent, so p = 0 and MRR = 0.
    m = one_turn(gold, hyps, slot="time", policy=EXACT)
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["avgp"] == pytest.approx(0.0)
    assert m["mrr"] == pytest.approx(0.0)
    assert m["l2"] == pytest.approx(1 + 0.8**2 + 0.2**2)


def test_ties_keep_list_order_and_rest_last():
    m = one_turn({"area": "north"}, [("south", 0.4), ("north", 0.4)])
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["mrr"] == pytest.approx(50.0)
    m = one_turn({"area": "north"}, [("north", 0.4), ("south", 0.4)])
    assert m["accuracy"] == pytest.approx(100.0)
    assert m["mrr"] == pytest.approx(100.0)
    # north .5 (wrong) ties with REST .5 (right); REST goes last.
    m = one_turn({}, [("north", 0.5)])
    assert m["accuracy"] == pytest.approx(0.0)
    assert m["mrr"] == pytest.approx(50.0)
    assert m["avgp"] == pytest.approx(50.0)


def test_schedules_select_turns():
    dialogue = slot_dialogue(
        [{}, {}, {"area": "north"}, {"area": "north"}],
        [None, {"area": [("north", 0.6)]},
         {"area": [("north", 0.8)], "food": [("thai", 0.5)]}, {"area": [("north", 1.0)]}],
    )
    result = scored_hypothesis_metrics([dialogue], EXACT, ["area", "food", "price"])
    # area tops: t0 REST 1 (right), t1 north .6 (wrong: gold lacks area), t2 right, t3 right.
    # food tops: t0, t1, t3 REST 1 (right); t2 thai .5 ties REST .5, thai first (wrong).
    s1, s2, s3 = (result[f"schedule{i}"]["slots"] for i in (1, 2, 3))
    assert s1["area"]["n"] == 4
    assert s1["area"]["accuracy"] == pytest.approx(75.0)
    assert s1["food"]["accuracy"] == pytest.approx(75.0)
    assert s1["price"]["accuracy"] == pytest.approx(100.0)
    # Schedule 2: area from t1 (first non-empty list), food from t2; price is never observable.
    assert s2["area"]["n"] == 3
    assert s2["area"]["accuracy"] == pytest.approx(200.0 / 3)
    assert s2["food"]["n"] == 2
    assert s2["food"]["accuracy"] == pytest.approx(50.0)
    assert all(value is None for value in s2["price"].values())
    mean2 = result["schedule2"]["slot_mean"]
    assert mean2["n"] == 5
    assert mean2["accuracy"] == pytest.approx((200.0 / 3 + 50.0) / 2)
    # Schedule 3: the last turn only.
    assert s3["area"]["n"] == s3["food"]["n"] == 1
    assert s3["area"]["avgp"] == pytest.approx(100.0)
    # A gold change also opens schedule 2, even without a list.
    gold_only = slot_dialogue([{}, {"area": "north"}, {"area": "north"}],
                              [{"food": [("thai", 1.0)]}, None, None])
    result = scored_hypothesis_metrics([gold_only], EXACT, ["area"])
    assert result["schedule2"]["slots"]["area"]["n"] == 2


def joint_dialogue():
    return HypDialogue(
        "j1",
        [{}, {"area": "north"}, {"area": "north", "food": "thai|indian"}],
        [None, None, None],
        [
            None,
            [({"area": "north"}, 0.7), ({"area": "south"}, 0.2)],
            [({"area": "north", "food": "indian", "price": "none"}, 0.6), ({"area": "north"}, 0.3)],
        ],
    )


def test_joint_with_lists():
    result = scored_hypothesis_metrics([joint_dialogue()], ALTERNATIVES, ["area", "food"])
    # t0: no list -> REST 1, right: p 1, L2 0.
    # t1: north .7 (right), south .2, REST .1: p .7, L2 = .3^2 + .2^2 + .1^2 = .14.
    # t2: the "none" price is absent and indian matches thai|indian -> right at .6;
    #     {area} .3 lacks food; REST .1. p .6, L2 = .4^2 + .3^2 + .1^2 = .26.
    j1 = result["schedule1"]["joint"]
    assert j1["n"] == 3
    assert j1["accuracy"] == pytest.approx(100.0)
    assert j1["avgp"] == pytest.approx(100.0 * 2.3 / 3)
    assert j1["l2"] == pytest.approx(0.4 / 3)
    assert j1["mrr"] == pytest.approx(100.0)
    # Schedule 2 starts at t1 (first gold change); schedule 3 is t2.
    assert result["schedule2"]["joint"]["n"] == 2
    assert result["schedule2"]["joint"]["avgp"] == pytest.approx(65.0)
    assert result["schedule3"]["joint"]["avgp"] == pytest.approx(60.0)
    assert not any("joint" in note for note in result["notes"])
    # Exact matching: at t2 neither listed state is right, and REST is not either (the gold
    # state is not empty), so the correct hypothesis is absent.
    exact = scored_hypothesis_metrics([joint_dialogue()], EXACT, ["area", "food"])
    last = exact["schedule3"]["joint"]
    assert last["accuracy"] == pytest.approx(0.0)
    assert last["avgp"] == pytest.approx(0.0)
    assert last["mrr"] == pytest.approx(0.0)


def test_joint_extra_slot_is_wrong_and_missing_lists_count_as_empty():
    dialogue = HypDialogue(
        "j2", [{"area": "north"}, {"area": "north"}], [None, None],
        [[({"area": "north", "food": "thai"}, 0.9)], None],
    )
    joint = scored_hypothesis_metrics([dialogue], EXACT, ["area"])["schedule1"]["joint"]
    # t0: the extra food slot makes .9 wrong; REST .1 is wrong too (gold is not empty).
    # t1: no list, REST takes mass 1 but the gold has a value: an empty list is never right.
    assert joint["n"] == 2
    assert joint["accuracy"] == pytest.approx(0.0)
    assert joint["avgp"] == pytest.approx(0.0)
    assert joint["mrr"] == pytest.approx(0.0)


def roc_dialogue(samples):
    """One slot-list turn per (top correct, top score); scores >= .5 keep the listed value top."""
    gold = [{"area": "x"}] * len(samples)
    hyps = [{"area": [("x" if correct else "y", score)]} for correct, score in samples]
    return slot_dialogue(gold, hyps)


def test_roc_eer_and_ca_by_hand():
    samples = [(True, 0.95), (True, 0.9), (False, 0.85), (True, 0.8), (False, 0.7),
               (True, 0.7), (False, 0.65), (False, 0.6), (True, 0.55), (False, 0.5)]
    result = scored_hypothesis_metrics([roc_dialogue(samples)], EXACT, ["area"])
    m = result["schedule1"]["slots"]["area"]
    assert m["accuracy"] == pytest.approx(50.0)
    # N 10, 5 right, 5 wrong. Accepted (right, wrong) as tau falls: nothing (0,0), .95 (1,0),
    # .9 (2,0), .85 (2,1), .8 (3,1), .7 (4,2), .65 (4,3), .6 (4,4), .55 (5,4), .5 (5,5).
    # V1 (/10): FA - FR: -.5, -.4, -.3, -.2, .1-.2, .2-.1, ... smallest |.| = .1 first at .8:
    #   EER = (.1 + .2) / 2 = .15. CA with FA <= .05: .2 (tau .9); <= .1: .3 (tau .8);
    #   <= .2: .4 (tau .7).
    assert m["roc_v1_eer"] == pytest.approx(15.0)
    assert m["roc_v1_ca05"] == pytest.approx(20.0)
    assert m["roc_v1_ca10"] == pytest.approx(30.0)
    assert m["roc_v1_ca20"] == pytest.approx(40.0)
    # V2 (/5): at .8 CA .6, FA .2, FR .4 -> |.2 - .4| = .2 is the smallest first -> EER .3.
    #   CA with FA <= .05 or .1: .4 (tau .9); <= .2: .6 (tau .8).
    assert m["roc_v2_eer"] == pytest.approx(30.0)
    assert m["roc_v2_ca05"] == pytest.approx(40.0)
    assert m["roc_v2_ca10"] == pytest.approx(40.0)
    assert m["roc_v2_ca20"] == pytest.approx(60.0)


def test_roc_ties_take_the_first_threshold_and_v2_none():
    # Four wrong tops at .9, two right tops at .5 (N 6). V1: accept nothing -> FA 0, FR 2/6;
    # tau .9 -> FA 4/6, FR 2/6; both |FA - FR| = 2/6, and "accept nothing" comes first in the
    # sweep, so EER = (0 + 2/6) / 2 = 1/6.
    samples = [(False, 0.9)] * 4 + [(True, 0.5)] * 2
    m = scored_hypothesis_metrics([roc_dialogue(samples)], EXACT, ["area"])
    m = m["schedule1"]["slots"]["area"]
    assert m["roc_v1_eer"] == pytest.approx(100.0 / 6)
    assert m["roc_v1_ca20"] == pytest.approx(0.0)  # any acceptance has FA >= 4/6
    # Every top wrong: V2 needs right tops, so it is None; V1 still defined.
    m = scored_hypothesis_metrics([roc_dialogue([(False, 0.6), (False, 0.8)])], EXACT, ["area"])
    m = m["schedule1"]["slots"]["area"]
    assert m["roc_v2_eer"] is None
    assert m["roc_v2_ca10"] is None
    assert m["roc_v1_eer"] == pytest.approx(0.0)  # nothing accepted: FA 0, FR 0


def test_custom_fa_points_name_keys():
    result = scored_hypothesis_metrics([roc_dialogue([(True, 0.9)])], EXACT, ["area"],
                                       schedules=(3,), fa_points=(0.3,))
    assert set(result) == {"schedule3", "notes"}
    m = result["schedule3"]["slots"]["area"]
    assert m["roc_v1_ca30"] == pytest.approx(100.0)
    assert "roc_v1_ca05" not in m


def test_no_hypotheses_returns_none():
    gold = [{"area": "north"}, {"area": "north"}]
    assert scored_hypothesis_metrics([slot_dialogue(gold, [None, None])], EXACT, ["area"]) is None
    assert scored_hypothesis_metrics([slot_dialogue(gold, [{}, {}])], EXACT, ["area"]) is None
    assert scored_hypothesis_metrics([], EXACT, ["area"]) is None
