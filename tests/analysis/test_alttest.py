"""The alternative-annotator test (Calderon et al. 2025): the leave-one-out scores by hand, the
one-sided t-test against scipy, Benjamini–Yekutieli against its definition, a judge that
stands in and one that does not, and too little overlap said plainly."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, ttest_1samp

from judge.analysis import agreement_report, alt_test, benjamini_yekutieli
from judge.analysis._alttest import MIN_SHARED, Q, _t_less, noninferiority_test
from judge.analysis._labels import HumanLabel, HumanLabels
from judge.analysis.tables import format_alt_test
from judge.errors import OptionError


def keys(n: int) -> list[tuple[str, int]]:
    return [(f"d{i // 4}", i % 4) for i in range(n)]


def panel(n: int, judge_error: float, reviewer_error: float, seed: int,
          reviewers: int = 3) -> tuple[dict, dict]:
    """A hidden truth, a judge and reviewers who each err independently at their rate."""
    rng = np.random.default_rng(seed)
    turns = keys(n)
    truth = {k: int(rng.random() < 0.7) for k in turns}

    def rater(error: float) -> dict:
        return {k: (1 - v if rng.random() < error else v) for k, v in truth.items()}

    return rater(judge_error), {f"r{j}": rater(reviewer_error) for j in range(reviewers)}


def test_scores_and_advantage_probabilities_by_hand(monkeypatch):
    monkeypatch.setattr("judge.analysis._alttest.MIN_SHARED", 2)
    turns = keys(4)
    judge = dict(zip(turns, [1, 0, 1, 1], strict=True))
    reviewers = {"a": dict(zip(turns, [1, 1, 0, 1], strict=True)),
                 "b": dict(zip(turns, [1, 0, 0, 1], strict=True)),
                 "c": dict(zip(turns, [1, 0, 1, 0], strict=True))}
    block = alt_test(judge, reviewers, epsilon=0.1, n_boot=0)
    a = block["reviewers"][0]
    # leave a out: others b, c. turn 0: judge 2/2, a 2/2 (tie: both win); turn 1: judge 2/2,
    # a 0/2 (judge); turn 2: judge 1/2, a 1/2 (tie); turn 3: judge 1/2, a 1/2 (tie)
    assert a["judge_agreement"]["value"] == pytest.approx(100 * (1 + 1 + 0.5 + 0.5) / 4)
    assert a["reviewer_agreement"]["value"] == pytest.approx(100 * (1 + 0 + 0.5 + 0.5) / 4)
    assert a["rho_judge"] == 1.0 and a["rho_reviewer"] == 0.75
    assert a["ties"] == 0.75 and a["judge_better"] == 0.25 and a["reviewer_better"] == 0.0
    # Tango's score test, by hand: b = 0 (+1), c = 1 (−1), n = 4, ε = 0.1; the restricted
    # MLE of P(d = −1) solves 8q² − 0.1q − 0.09 = 0: q = (0.1 + 1.7) / 16
    q = (0.1 + np.sqrt(0.01 + 4 * 8 * 0.09)) / 16
    z = (0 - 1 - 4 * 0.1) / np.sqrt(4 * (2 * q + 0.1 * 0.9))
    assert a["p_value"] == pytest.approx(norm.cdf(z))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_one_sided_t_test_is_scipys(seed):
    d = np.random.default_rng(seed).choice([-1.0, 0.0, 1.0], size=40, p=[0.2, 0.6, 0.2])
    for epsilon in (0.0, 0.1, 0.2):
        p, _ = _t_less(d, epsilon)
        assert p == pytest.approx(ttest_1samp(d, epsilon, alternative="less").pvalue)
    assert _t_less(np.zeros(30), 0.1)[0] == 0.0  # always tied: the judge is as good
    assert _t_less(np.ones(30), 0.1)[0] == 1.0  # the reviewer always better


def test_benjamini_yekutieli_rejects_by_its_step_up_rule():
    p = [0.001, 0.008, 0.039, 0.041, 0.2]
    c = sum(1 / i for i in range(1, 6))  # 2.2833
    limits = [k * 0.05 / (5 * c) for k in range(1, 6)]  # 0.00438, 0.00876, 0.0131, ...
    assert p[0] <= limits[0] and p[1] <= limits[1] and p[2] > limits[2]
    assert benjamini_yekutieli(p) == [True, True, False, False, False]
    assert benjamini_yekutieli([0.2, 0.001, 0.008]) == [False, True, True]
    assert benjamini_yekutieli([]) == []
    # a later p-value under its line pulls the earlier one in (step-up, not step-down):
    # m = 2, limits 0.0167 and 0.0333; 0.02 misses the first but 0.025 meets the second
    assert benjamini_yekutieli([0.02, 0.025]) == [True, True]
    assert benjamini_yekutieli([0.02, 0.04]) == [False, False]


def test_reviewer_p_values_between_the_by_cut_and_q_are_not_rejected(monkeypatch):
    """Three reviewers whose p-values (0.02, 0.03, 0.04) all lie below q = 0.05 (so BH's
    step-up, its largest under q k / 3 = 0.05, rejects all three, as no correction does) but
    above the Benjamini–Yekutieli lines (q k / (3 · 11/6): 0.009, 0.018, 0.027):
    corrected as the paper asks, the judge beats none of them. The per-reviewer test is
    replaced by one giving these p-values, so only the correction decides."""
    planned = [0.02, 0.03, 0.04]
    calls = []

    def fixed(d, epsilon):
        calls.append(len(d))
        return planned[(len(calls) - 1) % 3], 0.0

    monkeypatch.setattr("judge.analysis._alttest.noninferiority_test", fixed)
    judge, reviewers = panel(60, judge_error=0.15, reviewer_error=0.15, seed=4, reviewers=3)
    harmonic = 1 + 1 / 2 + 1 / 3
    by_lines = [k * Q / (3 * harmonic) for k in (1, 2, 3)]
    assert all(by < p < Q for p, by in zip(planned, by_lines, strict=True))
    assert planned[-1] <= 3 * Q / 3  # BH's step-up: the largest under its line rejects all
    block = alt_test(judge, reviewers, n_boot=0)
    assert [entry["p_value"] for entry in block["reviewers"]] == planned
    assert [entry["rejected"] for entry in block["reviewers"]] == [False, False, False]
    assert block["winning_rate"] == 0.0 and not block["passes"]
    assert "wins against 0 of 3" in block["verdict"]
    # at q = 0.1 the BY lines are 0.018, 0.036, 0.055: the largest p-value clears its line, so
    # step-up rejects all three
    calls.clear()
    loose = alt_test(judge, reviewers, q=0.1, n_boot=0)
    assert [entry["rejected"] for entry in loose["reviewers"]] == [True, True, True]
    assert loose["winning_rate"] == 1.0


def test_a_judge_as_good_as_the_majority_stands_in_and_a_poor_one_does_not():
    judge, reviewers = panel(120, judge_error=0.05, reviewer_error=0.15, seed=4)
    good = alt_test(judge, reviewers, n_boot=200)
    assert good["enough_overlap"] and good["winning_rate"] >= 0.5 and good["passes"]
    assert "may stand in" in good["verdict"]
    assert good["correction"] == "Benjamini-Yekutieli" and good["epsilon"] == 0.1
    for entry in good["reviewers"]:
        low, high = entry["judge_agreement"]["ci"]
        assert low <= entry["judge_agreement"]["value"] <= high
    poor, reviewers = panel(120, judge_error=0.35, reviewer_error=0.05, seed=5)
    bad = alt_test(poor, reviewers, n_boot=0)
    assert bad["winning_rate"] == 0.0 and not bad["passes"]
    assert "may not stand in" in bad["verdict"]
    assert all(not e["rejected"] for e in bad["reviewers"])
    # a generous ε lets a middling judge through where a strict one does not
    middling, reviewers = panel(200, judge_error=0.15, reviewer_error=0.1, seed=6)
    assert alt_test(middling, reviewers, epsilon=0.0, n_boot=0)["winning_rate"] < \
        alt_test(middling, reviewers, epsilon=0.3, n_boot=0)["winning_rate"]


def test_too_little_overlap_says_how_many_turns_are_needed():
    judge, reviewers = panel(12, judge_error=0.1, reviewer_error=0.1, seed=7, reviewers=2)
    block = alt_test(judge, reviewers, n_boot=0)
    assert not block["enough_overlap"] and block["winning_rate"] is None
    assert f"at least {MIN_SHARED} labelled turns" in block["verdict"]
    assert "r0: 12" in block["verdict"] and "not enough overlap" in block["verdict"]
    rows = format_alt_test(block)
    assert rows[0][-1] == f"too few (< {MIN_SHARED})"
    assert alt_test(judge, {"r0": reviewers["r0"]}) is None  # one reviewer: nothing to test


def test_the_agreement_report_carries_the_test_at_the_stated_epsilon():
    judge, reviewers = panel(60, judge_error=0.05, reviewer_error=0.15, seed=8)
    rows = [{"dialogue_id": d, "turn_index": t, "verdict": bool(v), "rule": {}}
            for (d, t), v in judge.items()]
    records = [HumanLabel(dialogue_id=d, turn_index=t, label=v, reviewer=name)
               for name, labels in reviewers.items() for (d, t), v in labels.items()]
    report = agreement_report(rows, HumanLabels(records), n_boot=0, epsilon=0.2)
    assert report["alt_test"]["epsilon"] == 0.2
    assert [e["reviewer"] for e in report["alt_test"]["reviewers"]] == ["r0", "r1", "r2"]
    with pytest.raises(OptionError, match="epsilon"):
        agreement_report(rows, HumanLabels(records), n_boot=0, epsilon=1.5)
    alone = [r for r in records if r.reviewer == "r0"]
    assert agreement_report(rows, HumanLabels(alone), n_boot=0)["alt_test"] is None


def constant_panel(seed: int, reviewers: int = 5, n: int = 100) -> tuple[dict, dict]:
    """Issue 42's case: TSA 95 %, reviewers at 10 % label noise, a judge saying "correct"
    on every turn."""
    rng = np.random.default_rng(seed)
    turns = keys(n)
    truth = {k: int(rng.random() < 0.95) for k in turns}
    panel = {f"r{j}": {k: v ^ int(rng.random() < 0.1) for k, v in truth.items()}
             for j in range(reviewers)}
    return dict.fromkeys(turns, 1), panel


def test_a_judge_that_says_correct_on_every_turn_does_not_stand_in():
    judge, reviewers = constant_panel(seed=42)
    block = alt_test(judge, reviewers, n_boot=0)
    assert block["winning_rate"] >= 0.5  # the test alone would let it through
    assert block["passes"] is None and block["unbalanced"]
    assert "too unbalanced" in block["verdict"] and "may stand in" not in block["verdict"]
    assert block["constant_judge"]["label"] == 1
    assert block["tie_share"] > 0.7  # ρ sits near 1 because most turns are ties
    assert format_alt_test(block)[0][6] == f"{100 * block['reviewers'][0]['ties']:.0f}"


def test_two_reviewers_give_figures_without_a_verdict():
    judge, reviewers = panel(120, judge_error=0.05, reviewer_error=0.15, seed=4, reviewers=2)
    block = alt_test(judge, reviewers, n_boot=0)
    assert block["enough_overlap"] and block["winning_rate"] is not None
    assert block["passes"] is None
    assert "no verdict" in block["verdict"] and "at least 3 reviewers" in block["verdict"]
    assert all("p_value" in e for e in block["reviewers"])


def test_the_score_test_holds_its_level_at_the_boundary_when_ties_dominate():
    """90 % ties, mean difference exactly ε: the paired t-test rejected about 11 % of such
    samples at nominal 5 %; the score test stays near 5 %."""
    rng = np.random.default_rng(7)
    rejected = 0
    for _ in range(4000):
        u = rng.random(50)
        d = np.where(u < 0.1, 1.0, np.where(u < 0.1, -1.0, 0.0))  # P(+1) = ε, P(−1) = 0
        rejected += noninferiority_test(d, 0.1)[0] <= 0.05
    assert rejected / 4000 <= 0.065
