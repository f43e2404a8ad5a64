"""Chance-corrected agreement: published worked examples to their printed precision, the
reference packages (krippendorff, irrCAC) to 1e-9, and reproducible bootstraps."""

from __future__ import annotations

import numpy as np
import pytest

from judge.analysis import cohen_kappa, gwet_ac1, krippendorff_alpha, pabak
from judge.analysis._statistics import (
    cluster_bootstrap,
    contingency,
    group_statistics,
    group_vectors,
    pair_statistics,
    percentile_interval,
    stratified_bootstrap,
    unit_counts,
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example A: two observers,
# binary data, ten units; printed alpha (nominal) = 0.095.
KRIPP_A = ([0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0])

# The same paper's example C: four observers, twelve units, nominal values 1-5, missing data
# (None); printed alpha = 0.743. Gwet (2014, Handbook of Inter-Rater Reliability, 4th ed.) uses
# the same ratings and prints AC1 = 0.7754 for them.
KRIPP_C = [
    [1, 1, None, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [None, 5, 5, 5], [None, None, 1, 1],
    [None, None, 3, None],
]
CATEGORIES_C = [1, 2, 3, 4, 5]

# Gwet (2014): two abstractors classify 100 pregnancies into three types (ectopic, abnormal
# intrauterine, normal intrauterine); rows = abstractor 1. Printed: Cohen's kappa 0.7964094
# (irrCAC's R vignette), Gwet's AC1 0.849, Brennan-Prediger 0.835.
ABSTRACTORS = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])

# A textbook two-rater yes/no table (50 units): yes/yes 20, yes/no 5, no/yes 10, no/no 15,
# po = 0.7, pe = 0.5, kappa = 0.4, PABAK = 2 * 0.7 - 1 = 0.4.
TEXTBOOK = ([1] * 25 + [0] * 25, [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)


def test_krippendorff_published_examples():
    a, b = KRIPP_A
    assert round(krippendorff_alpha(list(zip(a, b, strict=True))), 3) == 0.095
    closed = pair_statistics(contingency(a, b, [0, 1]))
    assert round(float(closed["alpha"]), 3) == 0.095
    assert round(krippendorff_alpha(KRIPP_C, CATEGORIES_C), 3) == 0.743
    group = group_statistics(group_vectors(unit_counts(KRIPP_C, CATEGORIES_C)).sum(axis=0), 5)
    assert round(float(group["alpha"]), 3) == 0.743


def test_gwet_published_examples():
    assert round(gwet_ac1(KRIPP_C, CATEGORIES_C), 4) == 0.7754
    closed = pair_statistics(ABSTRACTORS)
    assert round(float(closed["ac1"]), 3) == 0.849
    assert round(float(closed["kappa"]), 7) == 0.7964094
    assert round(float(closed["pabak"]), 3) == 0.835


def test_kappa_and_pabak_textbook_example():
    a, b = TEXTBOOK
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)
    assert pabak(a, b) == pytest.approx(0.4, abs=1e-12)


def test_high_agreement_paradox():
    # 90 turns both "correct", 5 + 5 split, none both "incorrect": raw agreement 90 %,
    # kappa slightly negative, AC1 high - the case the issue describes
    a = [1] * 90 + [1] * 5 + [0] * 5
    b = [1] * 90 + [0] * 5 + [1] * 5
    assert cohen_kappa(a, b) < 0
    assert gwet_ac1(list(zip(a, b, strict=True))) > 0.85
    assert pabak(a, b) == pytest.approx(0.8)


def test_undefined_values_are_none():
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) is None
    assert krippendorff_alpha([[1, 1], [1, 1]]) is None  # no disagreement can be expected
    assert krippendorff_alpha([[1, None], [0, None]]) is None  # nothing pairable
    assert gwet_ac1([[1, 1], [1, 1]]) == pytest.approx(1.0)  # AC1 stays defined


def _random_ratings(rng: np.random.Generator, units: int, raters: int, categories: int,
                    missing: float) -> list[list[int | None]]:
    out = []
    for _ in range(units):
        truth = int(rng.integers(categories))
        row = [truth if rng.random() < 0.7 else int(rng.integers(categories))
               for _ in range(raters)]
        out.append([None if rng.random() < missing else v for v in row])
    return out


def _package_alpha(ratings, q):
    """Krippendorff's alpha by the ``krippendorff`` package (GPL-3.0, so a test-only reference)."""
    krippendorff = pytest.importorskip("krippendorff", reason="krippendorff is in the test extra")
    data = np.full((max(len(r) for r in ratings), len(ratings)), np.nan)
    for u, row in enumerate(ratings):
        for r, value in enumerate(row):
            if value is not None:
                data[r, u] = float(value)
    return float(krippendorff.alpha(reliability_data=data, value_domain=list(range(q)),
                                    level_of_measurement="nominal"))


def test_closed_forms_match_the_krippendorff_package():
    rng = np.random.default_rng(11)
    for trial in range(30):
        q = int(rng.integers(2, 5))
        ratings = _random_ratings(rng, int(rng.integers(5, 60)), int(rng.integers(2, 6)), q,
                                  0.25 if trial % 2 else 0.0)
        expected = _package_alpha(ratings, q)
        assert krippendorff_alpha(ratings, list(range(q))) == pytest.approx(expected, abs=1e-9)
        counts = unit_counts(ratings, list(range(q)))
        got = float(group_statistics(group_vectors(counts).sum(axis=0), q)["alpha"])
        assert expected is not None and got == pytest.approx(expected, abs=1e-9)
        pairs = [(r[0], r[1]) for r in ratings if r[0] is not None and r[1] is not None]
        if len({v for p in pairs for v in p}) > 1:
            table = contingency([p[0] for p in pairs], [p[1] for p in pairs], list(range(q)))
            assert float(pair_statistics(table)["alpha"]) == pytest.approx(
                _package_alpha(pairs, q), abs=1e-9)


def test_pair_and_group_forms_agree_for_two_complete_raters():
    rng = np.random.default_rng(3)
    ratings = _random_ratings(rng, 80, 2, 2, 0.0)
    pair = pair_statistics(contingency([r[0] for r in ratings], [r[1] for r in ratings], [0, 1]))
    group = group_statistics(group_vectors(unit_counts(ratings, [0, 1])).sum(axis=0), 2)
    for name in ("agreement", "ac1", "alpha", "pabak"):
        assert float(pair[name]) == pytest.approx(float(group[name]), abs=1e-12), name


def _irrcac():
    return pytest.importorskip(
        "irrCAC", reason="irrCAC is the reference package for this check; install it with "
        "`pip install --no-deps irrCAC pandas` (see the crosscheck extra in pyproject.toml)")


def test_pair_statistics_match_irrcac_tables():
    _irrcac()
    import pandas as pd
    from irrCAC.table import CAC

    rng = np.random.default_rng(5)
    for _ in range(25):
        q = int(rng.integers(2, 5))
        table = rng.integers(0, 30, size=(q, q)) + np.diag(rng.integers(5, 60, size=q))
        cac = CAC(pd.DataFrame(table), digits=16)
        ours = pair_statistics(table)
        reference = {"kappa": cac.cohen(), "ac1": cac.gwet(), "alpha": cac.krippendorff(),
                     "pabak": cac.bp()}
        for name, result in reference.items():
            assert float(ours[name]) == pytest.approx(
                float(result["est"]["coefficient_value"]), abs=1e-9), (name, table.tolist())


def test_group_statistics_match_irrcac_raw_data():
    _irrcac()
    import pandas as pd
    from irrCAC.raw import CAC

    rng = np.random.default_rng(9)
    for trial in range(20):
        q = int(rng.integers(2, 4))
        ratings = _random_ratings(rng, int(rng.integers(8, 50)), int(rng.integers(2, 5)), q, 0.3)
        ratings = [r for r in ratings if any(v is not None for v in r)]
        frame = pd.DataFrame([[np.nan if v is None else float(v) for v in r] for r in ratings])
        cac = CAC(frame, categories=[float(c) for c in range(q)], digits=16)
        ours = group_statistics(group_vectors(unit_counts(ratings, list(range(q)))).sum(axis=0), q)
        assert float(ours["ac1"]) == pytest.approx(
            float(cac.gwet()["est"]["coefficient_value"]), abs=1e-9), trial
        assert float(ours["alpha"]) == pytest.approx(
            float(cac.krippendorff()["est"]["coefficient_value"]), abs=1e-9), trial
        assert gwet_ac1(ratings, list(range(q))) == pytest.approx(float(ours["ac1"]), abs=1e-12)


def test_published_examples_through_irrcac():
    _irrcac()
    import pandas as pd
    from irrCAC.raw import CAC

    frame = pd.DataFrame([[np.nan if v is None else float(v) for v in r] for r in KRIPP_C])
    # the categories given, as the handbook's example has them: irrCAC 0.4.4 infers them with
    # pandas, and under pandas 3 that counts the missing value (NaN) as a sixth category
    cac = CAC(frame, categories=[float(c) for c in CATEGORIES_C], digits=16)
    assert cac.categories == [float(c) for c in CATEGORIES_C]
    assert gwet_ac1(KRIPP_C, CATEGORIES_C) == pytest.approx(
        float(cac.gwet()["est"]["coefficient_value"]), abs=1e-9)
    assert krippendorff_alpha(KRIPP_C, CATEGORIES_C) == pytest.approx(
        float(cac.krippendorff()["est"]["coefficient_value"]), abs=1e-9)


def test_vectorised_replicates_equal_point_estimates():
    rng = np.random.default_rng(1)
    tables = rng.integers(0, 20, size=(50, 2, 2))
    batch = pair_statistics(tables)
    for i in range(50):
        one = pair_statistics(tables[i])
        for name in ("agreement", "kappa", "ac1", "alpha", "pabak"):
            assert np.allclose(batch[name][i], one[name], equal_nan=True)


def test_cluster_bootstrap_is_seeded():
    per_cluster = np.random.default_rng(0).integers(0, 5, size=(30, 4))
    first = cluster_bootstrap(per_cluster, 500, np.random.default_rng(42))
    assert np.array_equal(first, cluster_bootstrap(per_cluster, 500, np.random.default_rng(42)))
    assert not np.array_equal(first, cluster_bootstrap(per_cluster, 500,
                                                       np.random.default_rng(43)))
    assert first.shape == (500, 4)


def test_stratified_bootstrap_redraws_within_strata():
    # stratum A: two units of value 1 and 0; stratum B: one unit of value 5. With weights 3 and
    # 10 every replicate's total is 3*(draws of A's first unit) + 10*5, and the B part never
    # changes because B has a single unit.
    per_unit = np.array([[1.0], [0.0], [5.0]])
    sums = stratified_bootstrap(per_unit, ["A", "A", "B"], np.array([3.0, 3.0, 10.0]), 400,
                                np.random.default_rng(2))
    assert set(np.round(sums[:, 0], 9)) <= {50.0, 53.0, 56.0}
    assert {50.0, 56.0} <= set(np.round(sums[:, 0], 9))


def test_percentile_interval_ignores_undefined_replicates():
    assert percentile_interval(np.array([np.nan, np.nan]), 0.95) is None
    low, high = percentile_interval(np.array([np.nan, *range(101)]), 0.9)
    assert (low, high) == (pytest.approx(5.0), pytest.approx(95.0))
