"""Hand-made fixtures for every exact-match metric and its options (METRICS.md)."""

from __future__ import annotations

import math

import pytest

A = {"hotel-area": "north"}
AB = {"hotel-area": "north", "hotel-stars": "4"}


# --- JGA, SA ---------------------------------------------------------------------------------

def test_jga_compares_by_slot_key_even_with_dashes_in_values(score):
    gold = [[{"taxi-destination": "cote - bistro"}, {"taxi-destination": "cote - bistro"}]]
    pred = [[{"taxi-destination": "cote - bistro"}, {"taxi-destination": "cote"}]]
    m = score(gold, pred)
    assert m["jga"] == 50.0


def test_jga_pools_turns_across_dialogues_of_different_lengths(score):
    gold = [[A], [A, A, A]]
    pred = [[A], [A, {}, {}]]
    # pooled: 2 correct turns of 4 = 50 (the mean of per-dialogue JGAs would be 66.7)
    assert score(gold, pred)["jga"] == 50.0


def test_slot_accuracy_counts_union_mismatches_over_k(score):
    gold = [[AB]]
    pred = [[{"hotel-area": "south", "hotel-name": "x", "foo-bar": "y"}]]
    # mismatches: area (wrong), stars (missed), name (extra), foo-bar (out of schema) = 4 of 30
    assert score(gold, pred)["sa"] == pytest.approx(100 * 26 / 30)
    assert score(gold, pred, num_slots=10)["sa"] == pytest.approx(60.0)


def test_dontcare_is_an_ordinary_value_and_none_means_absent(score):
    gold = [[{"hotel-area": "dontcare"}]]
    assert score(gold, [[{"hotel-area": "dontcare", "hotel-name": "none"}]])["jga"] == 100.0
    assert score(gold, [[{}]])["jga"] == 0.0


def test_turn_with_both_states_empty(score):
    m = score([[{}]], [[{}]])
    assert m["jga"] == 100.0
    assert m["sa"] == 100.0
    assert m["aga"] is None  # no turn with a non-empty gold state: undefined
    assert m["rsa"] == 0.0  # reference behaviour
    assert score([[{}]], [[{}]], rsa_empty_turn="one")["rsa"] == 100.0
    assert score([[{}]], [[{}]], rsa_empty_turn="skip")["rsa"] is None


# --- AGA, RSA --------------------------------------------------------------------------------

def test_aga_ignores_over_predictions_and_empty_gold_turns(score):
    gold = [[{}, AB]]
    pred = [[{"hotel-name": "x"}, {"hotel-area": "north", "hotel-name": "x"}]]
    assert score(gold, pred)["aga"] == 50.0


def test_aga_frame_unit_averages_per_domain(score):
    gold = [[{"hotel-area": "north", "hotel-stars": "4", "taxi-leaveat": "10:00"}]]
    pred = [[{"hotel-area": "north", "taxi-leaveat": "10:00"}]]
    assert score(gold, pred)["aga"] == pytest.approx(200 / 3)  # 2 of 3 pairs
    assert score(gold, pred, aga_unit="frame")["aga"] == pytest.approx(75.0)  # (1/2 + 1) / 2


def test_rsa_over_union_of_active_slots(score):
    gold = [[AB]]
    pred = [[{"hotel-area": "north", "hotel-name": "x"}]]
    assert score(gold, pred)["rsa"] == pytest.approx(100 / 3)  # area right of area/stars/name


@pytest.mark.parametrize("empty_turn", ["zero", "skip", "one"])
@pytest.mark.parametrize(("gold", "pred"), [([{}, A], [A, A]), ([A, A], [{}, A])],
                         ids=["gold-empty", "pred-empty"])
def test_rsa_turn_with_one_empty_side_is_an_ordinary_turn(score, empty_turn, gold, pred):
    # rsa_empty_turn acts only when *both* states are empty; with one side empty the union
    # holds that side's slot, unmatched: RSA_t = 0 whatever the option, so (0 + 1) / 2
    assert score([gold], [pred], rsa_empty_turn=empty_turn)["rsa"] == 50.0


@pytest.mark.parametrize(("empty_turn", "expected"),
                         [("zero", 100 / 3), ("skip", 50.0), ("one", 200 / 3)])
def test_rsa_empty_turn_option_next_to_one_sided_turns(score, empty_turn, expected):
    gold = [[{}, {}, A]]
    pred = [[{}, A, A]]  # both empty (option), gold-only empty (0), exact (1)
    assert score(gold, pred, rsa_empty_turn=empty_turn)["rsa"] == pytest.approx(expected)


# --- FGA, TurnMatch --------------------------------------------------------------------------

def test_fga_dey_et_al_running_example(score):
    """Turn scores 1, 1, 0, 0.39, 0, 0.39 for lambda 0.5 (Dey et al., section 3)."""
    s1 = {"hotel-area": "north"}
    s2 = {**s1, "hotel-stars": "4"}
    s3 = {**s2, "hotel-name": "acorn"}
    gold = [[s1, s1, s2, s3, {**s3, "hotel-book day": "monday"},
             {**s3, "hotel-book day": "monday", "hotel-book people": "2"}]]
    bad = {**s1, "hotel-stars": "3"}  # type-1 error in turn 2
    p4 = {**bad, "hotel-name": "acorn"}  # turn 3 right locally, error carried over
    p5 = {**p4, "hotel-book day": "sunday"}  # new type-1 error in turn 4
    p6 = {**p5, "hotel-book people": "2"}
    pred = [[s1, s1, bad, p4, p5, p6]]
    x = 1 - math.exp(-0.5)
    m = score(gold, pred)
    assert m["fga"]["0.5"] == pytest.approx(100 * (2 + 2 * x) / 6)
    assert m["turn_match"] == pytest.approx(100 * 4 / 6)
    assert m["jga"] == pytest.approx(100 * 2 / 6)


def test_fga_lambda_zero_is_jga(score):
    gold = [[A, AB, AB]]
    pred = [[{}, {"hotel-stars": "4"}, {"hotel-stars": "4"}]]
    m = score(gold, pred, fga_lambdas=(0.0, 1.0))
    assert m["fga"]["0.0"] == m["jga"] == 0.0
    assert m["fga"]["1.0"] == pytest.approx(100 * ((1 - math.exp(-1)) + (1 - math.exp(-2))) / 3)


def test_fga_over_prediction_in_turn_is_a_type_1_error(score):
    gold = [[{}, A, A]]
    pred = [[{"hotel-name": "x"}, {"hotel-name": "x", **A}, {"hotel-name": "y", **A}]]
    m = score(gold, pred)
    # turn 0 error; turn 1 local match (distance 1); turn 2 changes name → error again
    assert m["fga"]["0.5"] == pytest.approx(100 * (1 - math.exp(-0.5)) / 3)


# --- turn update accuracy ----------------------------------------------------------------------

def test_turn_update_accuracy_and_removals(score):
    gold = [[AB, A]]  # gold removes stars in turn 1
    pred = [[AB, AB]]  # prediction keeps it
    assert score(gold, pred)["turn_update_accuracy"] == 100.0
    assert score(gold, pred, update_include_removals=True)["turn_update_accuracy"] == 50.0


# --- GCA -------------------------------------------------------------------------------------

def test_gca_counts_for_wrong_missed_over_and_correct(score):
    gold = [[{"hotel-area": "north", "hotel-stars": "4"}]]
    pred = [[{"hotel-area": "south", "hotel-name": "x"}]]
    m = score(gold, pred)["gca"]
    assert m["counts"] == {"C": 0, "W": 1, "O": 1, "M": 1}
    assert m["gca"] == 0.0  # VP = 0


def test_gca_both_sides_delete_reference_vs_dedupe(score):
    gold = [[A, {}]]
    pred = [[A, {}]]
    reference = score(gold, pred)["gca"]["counts"]
    assert reference == {"C": 2, "W": 0, "O": 0, "M": 1}  # deletion counted as C and as M
    deduped = score(gold, pred, gca_dedupe=True)["gca"]["counts"]
    assert deduped == {"C": 2, "W": 0, "O": 0, "M": 0}


def test_gca_gold_changes_value_while_prediction_deletes(score):
    gold = [[A, {"hotel-area": "south"}]]
    pred = [[A, {}]]
    assert score(gold, pred)["gca"]["counts"] == {"C": 1, "W": 1, "O": 0, "M": 1}
    assert score(gold, pred, gca_dedupe=True)["gca"]["counts"] == {"C": 1, "W": 1, "O": 0, "M": 0}


def test_gca_explicit_none_values(score):
    gold = [[{"hotel-area": "north", "hotel-stars": "none"}]]
    pred = [[{"hotel-area": "north", "hotel-stars": "none"}]]
    assert score(gold, pred)["gca"]["counts"] == {"C": 1, "W": 0, "O": 0, "M": 0}
    kept = score(gold, pred, keep_explicit_none=True)["gca"]["counts"]
    # the explicit none is a gold change matched by the prediction (C), and the reference's
    # prediction loop counts the same none again as a miss (M) unless deduplicated
    assert kept == {"C": 2, "W": 0, "O": 0, "M": 1}
    deduped = score(gold, pred, keep_explicit_none=True, gca_dedupe=True)["gca"]["counts"]
    assert deduped == {"C": 2, "W": 0, "O": 0, "M": 0}


def test_gca_undefined_when_nothing_changes(score):
    assert score([[{}]], [[{}]])["gca"]["gca"] == 0.0
    m = score([[{}]], [[{}]], undefined="null")["gca"]
    assert m["gca"] is None and m["vp"] is None


def test_gca_alpha_weights(score):
    gold = [[{"hotel-area": "north", "hotel-stars": "4"}]]
    pred = [[{"hotel-area": "north", "hotel-stars": "5"}]]
    # C=1, W=1: VP=VR=1/2, LP=LR=1 → harmonic mean with weights a, a, 1-a, 1-a
    for alpha in (10 / 11, 0.5):
        expected = 1 / (alpha / 0.5 + (1 - alpha) / 1)
        assert score(gold, pred, alpha=alpha)["gca"]["gca"] == pytest.approx(100 * expected)


# --- slot precision / recall / F1 ----------------------------------------------------------------

def test_slot_prf(score):
    gold = [[AB]]
    pred = [[{"hotel-area": "north", "hotel-stars": "3", "hotel-name": "x"}]]
    m = score(gold, pred)
    assert m["slot_precision"] == pytest.approx(100 / 3)
    assert m["slot_recall"] == pytest.approx(50.0)
    assert m["slot_f1"] == pytest.approx(40.0)
    empty = score([[{}]], [[{}]])
    assert empty["slot_precision"] is None and empty["slot_f1"] is None


# --- RULE verdicts / TSA ---------------------------------------------------------------------

def test_rule_tsa_uses_model_turn_output_and_gold_turn_changes(score):
    gold = [[A, AB]]
    pred = [[A, AB]]
    outputs = [[A, AB]]  # turn 1 repeats the unchanged area pair
    assert score(gold, pred)["rule_tsa"] == {"2.1": 100.0}  # derived turn outputs
    assert score(gold, pred, turn_outputs=outputs)["rule_tsa"] == {"2.1": 50.0}


def test_rule_nospace_ignores_spaces_and_none_pairs(score):
    gold = [[{"restaurant-name": "pizza hut fenditton"}]]
    pred = [[{"restaurant-name": "pizza hut fen ditton"}]]
    outputs = [[{"restaurant-name": "pizza hut fen ditton", "hotel-area": "none"}]]
    assert score(gold, pred, turn_outputs=outputs)["rule_tsa"]["2.1"] == 0.0
    nospace = score(gold, pred, turn_outputs=outputs, rule_match="nospace")
    assert nospace["rule_tsa"]["2.1"] == 100.0
    assert nospace["jga"] == 0.0  # the rule policy does not change the run's match policy


def test_rule_accepts_any_listed_alternative(score):
    gold = [[{"hotel-pricerange": "cheap|moderate"}]]
    pred = [[{"hotel-pricerange": "moderate"}]]
    m = score(gold, pred, version_key="gold_state_24")
    assert m["rule_tsa"] == {"2.4": 100.0}
    assert m["jga"] == 0.0  # exact policy: the literal string differs


# --- matching policies -------------------------------------------------------------------------

def test_policy_nospace(score):
    gold = [[{"taxi-destination": "pizza hut fenditton"}]]
    pred = [[{"taxi-destination": "pizza hut fen ditton"}]]
    assert score(gold, pred)["jga"] == 0.0
    assert score(gold, pred, match="nospace")["jga"] == 100.0


def test_policy_normalized(score):
    gold = [[{"taxi-leaveat": "19:00", "hotel-type": "guest house", "hotel-parking": "yes",
              "restaurant-name": "golden curry", "train-arriveby": "17:15"}]]
    pred = [[{"taxi-leaveat": "7pm", "hotel-type": "Guesthouse", "hotel-parking": "free",
              "restaurant-name": "The  Golden Curry", "train-arriveby": "1715"}]]
    assert score(gold, pred)["jga"] == 0.0
    assert score(gold, pred, match="normalized")["jga"] == 100.0


def test_policy_normalized_free_is_not_yes_outside_parking_internet(score):
    gold = [[{"restaurant-name": "yes"}]]
    pred = [[{"restaurant-name": "free"}]]
    assert score(gold, pred, match="normalized")["jga"] == 0.0


def test_policy_alternatives_resolution_is_sticky(score):
    gold = [[{"hotel-area": "north|east"}, {"hotel-area": "north|east"}]]
    pred = [[{"hotel-area": "east"}, {"hotel-area": "east"}]]
    m = score(gold, pred, match="alternatives", version_key="gold_state_24")
    assert m["jga"] == 100.0
    assert m["gca"]["counts"] == {"C": 1, "W": 0, "O": 0, "M": 0}
    exact = score(gold, pred, version_key="gold_state_24")
    assert exact["jga"] == 0.0


def test_policy_alternatives_combined_with_nospace(score):
    gold = [[{"taxi-destination": "pizza hut fenditton|pizza hut"}]]
    pred = [[{"taxi-destination": "pizza hut fen ditton"}]]
    assert score(gold, pred, match="alternatives")["jga"] == 0.0
    assert score(gold, pred, match="nospace+alternatives")["jga"] == 100.0


def test_predicted_pipe_is_never_split(score):
    gold = [[{"train-leaveat": "14:30"}]]
    pred = [[{"train-leaveat": "14:30 |"}]]
    assert score(gold, pred, match="alternatives")["jga"] == 0.0
