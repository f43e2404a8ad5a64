"""Prediction-powered estimates: the PPI++ reference against ppi_py, the finite-population
difference estimator by hand, the leave-one-out λ and the small-sample device, and estimates
from sample files of every design."""

from __future__ import annotations

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from judge.analysis import (
    CORNERS,
    DIFFERENCE_CORNERS,
    DIFFERENCE_PSEUDO_UNITS,
    JUDGE_NOTE,
    Stratum,
    design_estimate,
    draw_sample,
    labels_needed,
    plan_labels,
    ppi_mean,
    sample_estimates,
)
from judge.analysis._design import MIN_DIALOGUES, MIN_TURNS, t_value
from judge.analysis._labels import row_key
from judge.analysis._planning import assumed_cells, interval_widths
from judge.errors import DataMismatchError, OptionError


def synthetic(n: int, big_n: int, seed: int, *, p: float = 0.7, agree: float = 0.9):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < p).astype(float)
    f = np.where(rng.random(n) < agree, y, 1 - y)
    unlabelled = (rng.random(big_n) < p).astype(float)
    return y, f, unlabelled


@pytest.mark.parametrize(("n", "big_n", "seed"), [(50, 1000, 0), (100, 7000, 1), (200, 400, 2),
                                                  (30, 30, 3)])
def test_ppi_mean_matches_ppi_py(n, big_n, seed):
    y, f, unlabelled = synthetic(n, big_n, seed)
    ours = ppi_mean(y, f, unlabelled, confidence=0.95)
    low, high = ppi_mean_ci(y, f, unlabelled, alpha=0.05)
    point = ppi_mean_pointestimate(y, f, unlabelled)
    assert ours["value"] == pytest.approx(float(np.squeeze(point)), abs=1e-6)
    assert ours["ci"][0] == pytest.approx(float(np.squeeze(low)), abs=1e-6)
    assert ours["ci"][1] == pytest.approx(float(np.squeeze(high)), abs=1e-6)
    assert 0.0 <= ours["lambda"] <= 1.0
    fixed = ppi_mean(y, f, unlabelled, confidence=0.95, lam=1.0)
    low, high = ppi_mean_ci(y, f, unlabelled, alpha=0.05, lam=1.0)
    assert fixed["ci"] == pytest.approx([float(np.squeeze(low)), float(np.squeeze(high))],
                                        abs=1e-6)


def test_finite_population_point_estimate_is_ppi_with_the_population_as_unlabelled():
    rng = np.random.default_rng(5)
    population_f = (rng.random(2000) < 0.6).astype(float)
    population_y = np.where(rng.random(2000) < 0.88, population_f, 1 - population_f)
    drawn = rng.choice(2000, 80, replace=False)
    for lam in (0.0, 0.4, 1.0):
        ours = design_estimate(population_y[drawn], population_f[drawn], None, [slice(None)],
                               [Stratum.of(population_f)], tuning=lam)
        theirs = ppi_mean_pointestimate(population_y[drawn], population_f[drawn], population_f,
                                        lam=lam)
        assert float(ours.value) == pytest.approx(float(np.squeeze(theirs)), abs=1e-12)


def test_labels_only_is_the_textbook_stratified_estimate():
    """λ = 0: Σ W_h ȳ_h with variance Σ W_h² (1 − n_h/N_h) s_h² / n_h, by hand."""
    rng = np.random.default_rng(7)
    sizes = [300, 100, 40]
    judge = [(rng.random(size) < 0.7).astype(float) for size in sizes]
    labels = [rng.random(8) < 0.6, rng.random(5) < 0.5, rng.random(4) < 0.9]
    y = np.concatenate([lab.astype(float) for lab in labels])
    f = np.concatenate([j[: len(lab)] for j, lab in zip(judge, labels, strict=True)])
    groups = [np.arange(0, 8), np.arange(8, 13), np.arange(13, 17)]
    estimate = design_estimate(y, f, None, groups, [Stratum.of(j) for j in judge], tuning=0.0)
    total = sum(sizes)
    value = sum(size / total * lab.mean() for size, lab in zip(sizes, labels, strict=True))
    variance = sum((size / total) ** 2 * (1 - len(lab) / size) * np.var(lab, ddof=1) / len(lab)
                   for size, lab in zip(sizes, labels, strict=True))
    assert float(estimate.value) == pytest.approx(value)
    assert float(estimate.se) == pytest.approx(np.sqrt(variance))
    assert float(estimate.lam) == 0.0


def test_clustered_labels_only_is_the_ratio_estimator():
    """Dialogues as units: Σ y / Σ t with the linearised variance of a ratio, each squared
    residual divided by its shrinkage 1 − t/Σt (the ddof-1 variance when sizes are equal)."""
    y = np.array([3.0, 1.0, 4.0, 0.0, 2.0])
    t = np.array([4.0, 2.0, 5.0, 3.0, 2.0])
    population = Stratum(units=50, turns=180.0, judge=120.0, judge_spread=1.0)
    estimate = design_estimate(y, y, t, [slice(None)], [population], tuning=0.0)
    ratio = y.sum() / t.sum()
    residual = y - ratio * t
    mean_size = 180.0 / 50
    spread = np.sum(residual ** 2 / (1 - t / t.sum())) / 5
    variance = (1 - 5 / 50) * spread / (5 * mean_size ** 2)
    # the ratio less its jackknife bias estimate (finite-population corrected)
    without = (y.sum() - y) / (t.sum() - t)
    jackknifed = ratio - (1 - 5 / 50) * 4 * (without.mean() - ratio)
    assert float(estimate.value) == pytest.approx(jackknifed)
    assert float(estimate.se) == pytest.approx(np.sqrt(variance))
    # unequal sizes: Satterthwaite's df of the variance estimate under Var(y) ∝ t², built
    # here from explicit matrices (residual maker P, weights A), below the plain m − 1 = 4
    shrink = (5 - 1) / 5 / (1 - t / t.sum())
    maker = np.eye(5) - np.outer(t, np.ones(5)) / t.sum()
    root = np.diag(np.sqrt(shrink))
    form = root @ maker @ np.diag(t ** 2) @ maker.T @ root
    satterthwaite = np.trace(form) ** 2 / np.trace(form @ form)
    assert float(estimate.df) == pytest.approx(satterthwaite)
    assert 1 < float(estimate.df) < 4
    equal = design_estimate(y, y, np.full(5, 3.0), [slice(None)], [population], tuning=0.0)
    plain = (1 - 5 / 50) * np.var(y - y.mean(), ddof=1) / (5 * mean_size ** 2)
    assert float(equal.se) == pytest.approx(np.sqrt(plain))
    assert equal.df == 4  # equal sizes: the plain Student-t df, m − 1


def test_leave_one_out_lambda_leaves_each_unit_out():
    rng = np.random.default_rng(11)
    population_f = (rng.random(500) < 0.7).astype(float)
    y = np.where(rng.random(40) < 0.85, population_f[:40], 1 - population_f[:40])
    f = population_f[:40]
    stratum = Stratum.of(population_f)
    loo = design_estimate(y, f, None, [slice(None)], [stratum], tuning="loo")
    # unit 0's λ is the plain λ of the other 39 units (with the full-sample design weight)
    keep = np.arange(1, 40)
    weight_full = (1 - 40 / 500) / 40
    covariance = np.cov(y[keep], f[keep])[0, 1]
    lam0 = np.clip(weight_full * covariance / (weight_full * stratum.judge_spread), 0, 1)
    rho = stratum.judge / stratum.turns
    plain = design_estimate(y, f, None, [slice(None)], [stratum], tuning="plain")
    assert 0.0 <= float(plain.lam) <= 1.0
    # rebuild the leave-one-out value by brute force
    lams = []
    for i in range(40):
        others = np.delete(np.arange(40), i)
        c = np.cov(y[others], f[others])[0, 1]
        lams.append(np.clip(c / stratum.judge_spread, 0, 1))
    assert lams[0] == pytest.approx(lam0)
    expected = np.mean(y - np.array(lams) * (f - rho))
    assert float(loo.value) == pytest.approx(expected)
    assert float(loo.lam) == pytest.approx(np.mean(lams))


def test_corner_pseudo_units_keep_an_interval_when_no_one_disagrees():
    f = np.array([1.0] * 30 + [0.0] * 10)
    population = Stratum.of(np.concatenate([f, (np.arange(400) % 3 > 0).astype(float)]))
    bare = design_estimate(f, f, None, [slice(None)], [population], tuning=1.0)
    guarded = design_estimate(f, f, None, [slice(None)], [population], tuning=1.0,
                              corners=CORNERS)
    assert float(bare.se) == 0.0
    assert float(guarded.se) > 0.0
    assert float(guarded.value) == float(bare.value)  # the point estimate is unchanged


def test_a_difference_uses_the_corners_only_where_its_variance_estimate_is_zero():
    rng = np.random.default_rng(4)
    population_f = rng.choice([-1.0, 0.0, 1.0], size=500, p=[0.07, 0.86, 0.07])
    stratum = [Stratum.of(population_f)]
    agreeing = population_f[:50]  # every labelled difference equals the judge's
    disagreeing = agreeing.copy()
    disagreeing[:3] = [1.0, -1.0, 1.0] if agreeing[0] != 1.0 else [0.0, -1.0, 0.0]
    y = np.stack([agreeing, disagreeing])
    f = np.stack([agreeing, agreeing])
    options = {"tuning": 1.0, "corners": DIFFERENCE_CORNERS,
               "pseudo_units": DIFFERENCE_PSEUDO_UNITS}
    bare = design_estimate(y, f, None, [slice(None)], stratum, tuning=1.0)
    always = design_estimate(y, f, None, [slice(None)], stratum, recentre=False, **options)
    guarded = design_estimate(y, f, None, [slice(None)], stratum, only_degenerate=True,
                              **options)
    assert float(bare.se[0]) < 1e-12 < float(bare.se[1])  # 0 but for rounding
    assert float(guarded.se[0]) == pytest.approx(float(always.se[0]))
    assert float(guarded.se[0]) > 0.01
    assert float(guarded.se[1]) == float(bare.se[1])  # a variance it can estimate is kept
    assert np.array_equal(guarded.value, bare.value)


def test_batches_give_the_same_figures_as_one_sample_at_a_time():
    rng = np.random.default_rng(3)
    population_f = (rng.random(300) < 0.6).astype(float)
    population_y = np.where(rng.random(300) < 0.9, population_f, 1 - population_f)
    drawn = np.array([rng.choice(300, 25, replace=False) for _ in range(6)])
    batch = design_estimate(population_y[drawn], population_f[drawn], None, [slice(None)],
                            [Stratum.of(population_f)], tuning="loo", corners=CORNERS)
    for row in range(6):
        one = design_estimate(population_y[drawn[row]], population_f[drawn[row]], None,
                              [slice(None)], [Stratum.of(population_f)], tuning="loo",
                              corners=CORNERS)
        assert float(batch.value[row]) == pytest.approx(float(one.value))
        assert float(batch.se[row]) == pytest.approx(float(one.se))


# --------------------------------------------------------------------------- from runs


def make_rows(dialogues: int = 120, seed: int = 0):
    """A run whose judge agrees with the (hidden) human label on about 90 % of turns."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for d in range(dialogues):
        for turn in range(int(rng.integers(2, 7))):
            label = int(rng.random() < 0.7)
            verdict = label if rng.random() < 0.9 else 1 - label
            row = {"dialogue_id": f"D{d:03d}", "turn_index": turn, "verdict": bool(verdict),
                   "rule": {"2.1": bool(verdict)},
                   "pred_turn_state": {("hotel-area" if d % 3 else "train-day"): "x"},
                   "gold_turn_state": {"2.1": {}}}
            rows.append(row)
            truth[row_key(row)] = label
    return rows, truth


ROWS, TRUTH = make_rows()


def test_estimates_from_a_random_sample_have_the_promised_shape():
    sample = draw_sample(ROWS, n=60, design="random", seed=2)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    stray = next(k for k in TRUTH if k not in labels)
    labels[stray] = 1  # a label from the disagreement queue: not part of the design
    result = sample_estimates(sample, [ROWS], [labels])
    tsa = result["estimates"]["tsa"]
    assert set(result["estimates"]) == {"tsa"}
    assert tsa["judge"]["ci"] is None and tsa["judge"]["note"] == JUDGE_NOTE
    assert tsa["judge"]["value"] == pytest.approx(
        100 * np.mean([r["verdict"] for r in ROWS]))
    for name in ("labels", "ppi"):
        figure = tsa[name]
        assert figure["n_labelled"] == 60 and figure["n_turns"] == len(ROWS)
        low, high = figure["ci"]
        assert 0 <= low < figure["value"] < high <= 100
    assert tsa["labels"]["value"] == pytest.approx(100 * np.mean(
        [TRUTH[t.key] for t in sample.turns]))
    assert 0 <= tsa["ppi"]["lambda"] <= 1 and tsa["ppi"]["tuning"] == "loo"
    assert result["left_out"]["count"] == 1
    assert result["left_out"]["examples"] == [{"dialogue_id": stray[0],
                                               "turn_index": stray[1]}]
    assert result["design"]["design"] == "random" and result["design"]["unit"] == "turn"


def test_a_judge_rule_design_gives_ppi_nothing_to_work_with():
    """Inside a judge × RULE stratum the judge is constant: stratified PPI = labels only."""
    sample = draw_sample(ROWS, n=40, gold="2.1", seed=1, design="judge-rule")
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    tsa = sample_estimates(sample, [ROWS], [labels])["estimates"]["tsa"]
    assert tsa["ppi"]["value"] == pytest.approx(tsa["labels"]["value"])
    assert tsa["ppi"]["ci"] == pytest.approx(tsa["labels"]["ci"])


def test_whole_dialogues_estimate_jga_and_success_clustered():
    sample = draw_sample(ROWS, n=25, design="domain", unit="dialogue", seed=4)
    assert sample.unit == "dialogue"
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    result = sample_estimates(sample, [ROWS], [labels])
    assert set(result["estimates"]) == {"tsa", "jga", "success"}
    success = result["estimates"]["success"]
    dialogues = {r["dialogue_id"] for r in ROWS}
    assert success["labels"]["n_labelled"] == 25
    judged = {}
    for r in ROWS:
        judged.setdefault(r["dialogue_id"], []).append(r["verdict"])
    assert success["judge"]["value"] == pytest.approx(
        100 * np.mean([all(v) for v in judged.values()]))
    assert len(judged) == len(dialogues)
    for metric in ("tsa", "jga", "success"):
        figure = result["estimates"][metric]["ppi"]
        assert figure["ci"][0] <= figure["value"] <= figure["ci"][1]


def test_partly_labelled_dialogues_are_left_out_and_named():
    sample = draw_sample(ROWS, n=10, design="random", unit="dialogue", seed=0)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    dropped = sample.turns[0].key
    del labels[dropped]
    result = sample_estimates(sample, [ROWS], [labels])
    assert result["estimates"]["tsa"]["labels"]["n_labelled"] == 9
    assert result["unlabelled_sampled_turns"]["count"] == 1


def test_difference_of_two_runs_on_one_shared_sample():
    other = [dict(r, verdict=not r["verdict"] if i % 7 == 0 else r["verdict"])
             for i, r in enumerate(ROWS)]
    truth_b = {k: (1 - v if i % 5 == 0 else v) for i, (k, v) in enumerate(TRUTH.items())}
    sample = draw_sample(ROWS, n=80, design="random", seed=9)
    labels_a = {t.key: TRUTH[t.key] for t in sample.turns}
    labels_b = {t.key: truth_b[t.key] for t in sample.turns}
    result = sample_estimates(sample, [ROWS, other], [labels_a, labels_b], names=["A", "B"])
    tsa = result["estimates"]["tsa"]
    assert result["difference"] == "A - B"
    judge_a = np.mean([r["verdict"] for r in ROWS])
    judge_b = np.mean([r["verdict"] for r in other])
    assert tsa["judge"]["value"] == pytest.approx(100 * (judge_a - judge_b))
    assert tsa["labels"]["value"] == pytest.approx(100 * np.mean(
        [labels_a[k] - labels_b[k] for k in labels_a]))
    assert -100 <= tsa["ppi"]["ci"][0] <= tsa["ppi"]["value"] <= tsa["ppi"]["ci"][1] <= 100
    missing = [r for r in other if r["dialogue_id"] != "D000"]
    with pytest.raises(DataMismatchError, match="does not hold every turn"):
        sample_estimates(sample, [ROWS, missing], [labels_a, labels_b])


def test_a_stratum_without_labels_cannot_be_estimated():
    sample = draw_sample(ROWS, n=30, design="domain", seed=0)
    strata = sorted({t.stratum for t in sample.turns})
    labels = {t.key: TRUTH[t.key] for t in sample.turns if t.stratum != strata[0]}
    tsa = sample_estimates(sample, [ROWS], [labels])["estimates"]["tsa"]
    assert tsa["ppi"]["value"] is None and "no labelled turn in stratum" in tsa["ppi"]["note"]
    assert tsa["judge"]["value"] is not None


def test_options_are_checked():
    sample = draw_sample(ROWS, n=20, design="random")
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    with pytest.raises(OptionError, match="confidence"):
        sample_estimates(sample, [ROWS], [labels], confidence=1.5)
    with pytest.raises(OptionError, match="tuning"):
        sample_estimates(sample, [ROWS], [labels], tuning="best")
    with pytest.raises(OptionError, match="fixed λ"):
        sample_estimates(sample, [ROWS], [labels], tuning=1.5)


def test_planning_from_a_pilot_and_from_an_assumed_disagreement():
    assumed = plan_labels(ROWS, width=17.0, disagreement=0.1)
    assert assumed["ppi"]["labels_needed"] < assumed["labels"]["labels_needed"]
    assert "80%" in assumed["criterion"] and assumed["share"] == 0.8
    # the n reaches the width in at least 80 % of samples, the median alone would not do
    for key in ("labels", "ppi"):
        assert assumed[key]["width_at_share"] <= 17.0
        assert assumed[key]["median_width"] < assumed[key]["width_at_share"]
        assert assumed[key]["labels_needed"] >= MIN_TURNS
    # the normal-approximation median figure plans fewer than the promise needs
    p = np.mean([r["verdict"] for r in ROWS])
    assert labels_needed(p * (1 - p), 0.17, len(ROWS), 0.95) < \
        assumed["labels"]["labels_needed"]
    # ±8.5 points at p(1 − p) ≈ 0.21 from an infinite population: 4·1.96²·0.21/0.17² ≈ 112
    assert labels_needed(0.21, 0.17, 10 ** 9, 0.95) == 112
    sample = draw_sample(ROWS, n=60, design="random", seed=2)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    pilot = plan_labels(ROWS, width=20.0, sample=sample, human=labels)
    assert pilot["basis"]["labelled"] == 60
    assert pilot["ppi"]["labels_needed"] <= pilot["labels"]["labels_needed"]
    with pytest.raises(OptionError, match="not both"):
        plan_labels(ROWS, width=10.0)
    with pytest.raises(OptionError, match="width"):
        plan_labels(ROWS, width=0.0, disagreement=0.1)


@pytest.mark.parametrize("disagreement", [0.0, 0.001, 0.01, 0.05])
def test_the_plan_keeps_its_promise_for_good_judges(disagreement):
    """--disagreement 0 used to plan 0 labels, 0.01 plan 16 (median width 24 for 10)."""
    rows = [{"dialogue_id": f"D{i // 8}", "turn_index": i % 8, "verdict": i % 10 < 7}
            for i in range(5000)]
    plan = plan_labels(rows, width=10.0, disagreement=disagreement)
    counts = assumed_cells(5000, 0.7, disagreement)
    for key, tuning in (("labels", 0.0), ("ppi", "loo")):
        n = plan[key]["labels_needed"]
        assert n >= MIN_TURNS
        # a fresh simulation (another seed) of that n reaches the width in >= 80 % of samples
        widths = interval_widths(counts, n, tuning=tuning, samples=2000, seed=11)
        assert np.mean(widths <= 0.10) >= 0.78, (key, n)
        assert float(np.min(widths)) > 0  # never an interval that claims certainty


def test_plan_never_exceeds_the_run_and_a_census_needs_every_turn():
    small = ROWS[:30]
    plan = plan_labels(small, width=1.0, disagreement=0.2)
    assert plan["labels"]["labels_needed"] == 30 == plan["minimum"]


def test_intervals_take_t_quantiles_from_the_labelled_units():
    rng = np.random.default_rng(8)
    f = (rng.random(400) < 0.7).astype(float)
    y = np.where(rng.random(400) < 0.9, f, 1 - f)
    estimate = design_estimate(y[:12], f[:12], None, [slice(0, 6), slice(6, 12)],
                               [Stratum.of(f[:200]), Stratum.of(f[200:])], tuning=0.0)
    assert estimate.df == 10  # 12 labelled units, 2 strata
    low, high = estimate.interval(0.95)
    assert float(high - low) == pytest.approx(2 * 2.2281389 * float(estimate.se), rel=1e-6)
    assert float(t_value(0.95, float("inf"))) == pytest.approx(1.959964, rel=1e-6)


def test_a_whole_dialogue_sample_where_judge_and_people_agree_keeps_a_width():
    """Every drawn dialogue's labels equal the judge's verdicts: the residual variance is 0,
    which used to give JGA ppi 43.6 [43.6, 43.6]."""
    sample = draw_sample(ROWS, n=5, design="random", unit="dialogue", seed=3)
    labels = {t.key: int(next(r["verdict"] for r in ROWS if row_key(r) == t.key))
              for t in sample.turns}
    result = sample_estimates(sample, [ROWS], [labels])
    for metric in ("tsa", "jga", "success"):
        for name in ("labels", "ppi"):
            figure = result["estimates"][metric][name]
            low, high = figure["ci"]
            assert high - low > 1.0, (metric, name, figure)
            assert "only 5 labelled dialogues" in figure["warning"]
    sample = draw_sample(ROWS, n=MIN_DIALOGUES, design="random", unit="dialogue", seed=3)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    figure = sample_estimates(sample, [ROWS], [labels])["estimates"]["jga"]["ppi"]
    assert "warning" not in figure


def test_a_difference_from_a_judge_rule_sample_is_refused_with_the_design_to_use():
    other = [dict(r, verdict=not r["verdict"] if i % 7 == 0 else r["verdict"])
             for i, r in enumerate(ROWS)]
    sample = draw_sample(ROWS, n=40, gold="2.1", seed=1, design="judge-rule")
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    with pytest.raises(OptionError, match="--design random"):
        sample_estimates(sample, [ROWS, other], [labels, labels])


def test_the_strata_of_a_difference_come_from_the_run_the_sample_was_drawn_from():
    """A domain stratum is a fact of the sampled run's predictions: pair (B, C) of a domain
    sample drawn from A must use A's strata, not B's (it failed with three runs)."""
    other = [dict(r, pred_turn_state={"restaurant-food": "y"}) if i % 4 == 0 else r
             for i, r in enumerate(ROWS)]
    sample = draw_sample(ROWS, n=40, design="domain", seed=1)
    labels = {t.key: TRUTH[t.key] for t in sample.turns}
    with pytest.raises(DataMismatchError):
        sample_estimates(sample, [other, ROWS], [labels, labels])
    result = sample_estimates(sample, [other, ROWS], [labels, labels], drawn_from=ROWS)
    assert result["estimates"]["tsa"]["labels"]["value"] == pytest.approx(0.0)
