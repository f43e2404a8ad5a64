"""The leaderboard's statistics against hand-computed values and textbook estimators: the CR1
cluster-robust variance of a mean over turns (statsmodels' OLS with ``cov_type='cluster'``),
the paired difference, the cluster jackknife of GCA, Holm and Benjamini–Yekutieli adjusted
p-values, rank intervals and groups; and the per-turn verdicts pooled back into the suite's
figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge import MetricOptions, compute_metrics, load_dialogues, load_predictions, load_schema
from judge.analysis import adjust, difference, interval, jackknife_estimate, ratio_estimate
from judge.analysis._clustered import indistinct_groups, rank_intervals
from judge.metrics import gca_from_counts, turn_verdicts
from judge.metrics._gca import ChangeCounts, gca_score

from ..conftest import EXAMPLES, shared_path


def _clustered_case(seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-turn 0/1 verdicts of two systems on 40 dialogues of 1 to 12 turns, correlated
    within dialogues (a dialogue-level difficulty), and each turn's dialogue."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 13, size=40)
    cluster = np.repeat(np.arange(40), sizes)
    difficulty = rng.normal(size=40)[cluster]
    a = (rng.normal(size=cluster.size) + difficulty > 0).astype(float)
    b = (rng.normal(size=cluster.size) + difficulty > 0.3).astype(float)
    return a, b, cluster


def _per_dialogue(values: np.ndarray, cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = int(cluster.max()) + 1
    return (np.bincount(cluster, weights=values, minlength=g),
            np.bincount(cluster, minlength=g).astype(float))


def test_a_hand_computed_ratio_estimate():
    """Three dialogues of 2, 1 and 3 turns with one right turn each: 3/6 = 0.5; influences
    (1 - 1, 1 - 0.5, 1 - 1.5) / 6; CR1 variance 3/2 · (0.25 + 0.25) / 36 = 1/48."""
    found = interval(ratio_estimate(np.array([1.0, 1.0, 1.0]), np.array([2.0, 1.0, 3.0])),
                     0.95)
    assert found.value == 0.5
    assert found.se == pytest.approx(math.sqrt(1 / 48), abs=1e-15)
    assert found.df == 2
    half = 4.302652729749464 * math.sqrt(1 / 48)  # t(0.975, 2 df)
    assert (found.low, found.high) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-12)


def test_the_clustered_variance_is_statsmodels_cluster_robust_ols():
    sm = pytest.importorskip("statsmodels.api")
    a, _b, cluster = _clustered_case()
    fit = sm.OLS(a, np.ones((a.size, 1))).fit(cov_type="cluster",
                                               cov_kwds={"groups": cluster}, use_t=True)
    found = interval(ratio_estimate(*_per_dialogue(a, cluster)), 0.95)
    assert found.value == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert found.se == pytest.approx(float(fit.bse[0]), abs=1e-9)
    low, high = fit.conf_int(alpha=0.05)[0]
    assert (found.low, found.high) == pytest.approx((low, high), abs=1e-9)


def test_the_paired_difference_is_the_clustered_ols_of_turn_differences():
    sm = pytest.importorskip("statsmodels.api")
    a, b, cluster = _clustered_case(11)
    fit = sm.OLS(a - b, np.ones((a.size, 1))).fit(cov_type="cluster",
                                                   cov_kwds={"groups": cluster}, use_t=True)
    found = difference(ratio_estimate(*_per_dialogue(a, cluster)),
                       ratio_estimate(*_per_dialogue(b, cluster)), 0.95)
    assert found.value == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert found.se == pytest.approx(float(fit.bse[0]), abs=1e-9)
    assert found.p == pytest.approx(float(fit.pvalues[0]), abs=1e-9)
    # the unpaired error is not the paired one (the pairing is what keeps the rate honest)
    alone = [interval(ratio_estimate(*_per_dialogue(x, cluster)), 0.95).se for x in (a, b)]
    assert abs(found.se - math.hypot(*alone)) > 1e-3


def test_the_gca_jackknife_is_the_textbook_leave_one_dialogue_out_variance():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 6, size=(25, 4))
    counts[:, 0] += 3  # correct changes in every dialogue
    found = interval(jackknife_estimate(counts, gca_from_counts), 0.95)
    total = counts.sum(axis=0)
    pooled = gca_score(ChangeCounts(*map(int, total)))["gca"]
    assert found.value * 100 == pytest.approx(pooled, abs=1e-9)
    left_out = np.array([gca_score(ChangeCounts(*map(int, total - row)))["gca"] / 100
                         for row in counts])
    g = len(counts)
    textbook = math.sqrt((g - 1) / g * np.sum((left_out - left_out.mean()) ** 2))
    assert found.se == pytest.approx(textbook, abs=1e-12)


def test_vectorised_gca_is_the_suites_gca_on_edge_counts():
    cases = [(0, 0, 0, 0), (0, 2, 1, 1), (3, 0, 0, 0), (5, 2, 0, 3), (1, 0, 4, 0)]
    for c, w, o, m in cases:
        for undefined in ("zero", "null"):
            expected = gca_score(ChangeCounts(c, w, o, m), undefined=undefined)["gca"]
            got = gca_from_counts(np.array([[c, w, o, m]]), undefined=undefined)[0]
            if expected is None:
                assert np.isnan(got)
            else:
                assert got * 100 == pytest.approx(expected, abs=1e-12), (c, w, o, m)


def test_holm_and_by_adjusted_p_values_are_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = [0.01, 0.04, 0.03, 0.20, 0.001, 0.04]
    for ours, theirs in (("holm", "holm"), ("by", "fdr_by")):
        expected = multitest.multipletests(p, method=theirs)[1]
        assert adjust(p, ours) == pytest.approx(expected, abs=1e-12)
    # by hand: Holm multiplies the k-th smallest by m - k + 1 and keeps the order
    assert adjust([0.01, 0.02, 0.03], "holm") == pytest.approx([0.03, 0.04, 0.04])
    assert np.isnan(adjust([0.5, float("nan")], "holm")[1])


def test_rank_intervals_and_groups_from_pairwise_decisions():
    """A > C, A > D, B > D significant; the rest not: ranks [1,2], [1,3], [2,4], [3,4];
    groups (in rank order A B C D) {A, B}, {B, C}, {C, D}."""
    better = np.zeros((4, 4), dtype=bool)
    better[0, 2] = better[0, 3] = better[1, 3] = True
    assert rank_intervals([0.9, 0.8, 0.7, 0.6], better) == [(1, 2), (1, 3), (2, 4), (3, 4)]
    assert indistinct_groups([0, 1, 2, 3], better) == [[0, 1], [1, 2], [2, 3]]
    assert indistinct_groups([0, 1], np.zeros((2, 2), dtype=bool)) == [[0, 1]]


def _pooled_equals_suite(dialogues_path, predictions_path, schema_path, match):
    schema = load_schema(schema_path)
    dialogues = load_dialogues(dialogues_path)
    predictions = load_predictions(predictions_path, dialogues, schema)
    options = MetricOptions(match=match, breakdowns=False)
    for version in dialogues.versions:
        turns = turn_verdicts(dialogues, predictions, schema, version=version,
                              options=options, fga_lambda=0.5)
        suite = compute_metrics(dialogues, predictions, schema, options,
                                gold=version).systems[0].metrics
        assert turns.jga.mean() * 100 == pytest.approx(suite["jga"], abs=1e-9)
        assert turns.sa.mean() * 100 == pytest.approx(suite["sa"], abs=1e-9)
        assert turns.fga.mean() * 100 == pytest.approx(suite["fga"]["0.5"], abs=1e-9)
        pooled = gca_from_counts(turns.changes.sum(axis=0)) * 100
        assert pooled == pytest.approx(suite["gca"]["gca"], abs=1e-9)


@pytest.mark.parametrize("match", ["exact", "normalized+alternatives"])
def test_per_turn_verdicts_pool_to_the_suites_figures(match):
    _pooled_equals_suite(EXAMPLES / "dialogues.jsonl", EXAMPLES / "predictions-weak.jsonl",
                         EXAMPLES / "schema.json", match)


def test_per_turn_verdicts_pool_to_the_suites_figures_on_the_shared_set():
    data = shared_path("multiwoz")
    _pooled_equals_suite(data / "dialogues.jsonl.gz", data / "predictions" / "da.jsonl.gz",
                         data / "schema.json", "exact")


def test_a_streaming_scorer_in_small_chunks_gives_the_same_columns(monkeypatch):
    """Turns scored a dialogue at a time into fixed-size chunks (a chunk boundary inside a
    dialogue) give the columns of the whole-set scorer."""
    from judge.metrics import _turns

    monkeypatch.setattr(_turns, "_CHUNK", 3)
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    predictions = load_predictions(EXAMPLES / "predictions-weak.jsonl", dialogues, schema)
    scorer = _turns.TurnScorer(schema, MetricOptions(), fga_lambda=0.5)
    for dialogue in dialogues.dialogues:
        scorer.add([t.gold_states["2.1"] for t in dialogue.turns],
                   [t.pred_state or {} for t in predictions.for_dialogue(dialogue).turns])
    chunked = scorer.finish()
    whole = turn_verdicts(dialogues, predictions, schema, version="2.1",
                          options=MetricOptions(), fga_lambda=0.5)
    assert len(chunked.jga) == dialogues.num_turns == 11
    for name in ("jga", "wrong", "fga_mark", "changes", "domain_errors"):
        assert np.array_equal(getattr(chunked, name), getattr(whole, name)), name
    assert not chunked.jga.all() and chunked.changes.sum() > 0  # a real case, not all zeros
