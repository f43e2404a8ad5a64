"""Chance-corrected agreement: Cohen's kappa, Gwet's AC1, Krippendorff's alpha and PABAK.

Raw agreement misleads when one label dominates (most predicted turn states are right): two
raters who both say "correct" 90 % of the time agree on 82 % of turns by chance alone, so kappa
can be low or negative while raw agreement is high. The coefficients here correct for chance in
different ways, and judge-evaluation work reports them side by side:

* **Cohen's kappa** takes chance from each rater's own label distribution (two raters).
* **Gwet's AC1** takes chance from the share of hard-to-classify units; it stays stable when one
  category dominates (Gwet 2008).
* **Krippendorff's alpha** (nominal) compares observed with expected disagreement over all
  pairable values; it allows any number of raters and missing labels (Krippendorff 2011).
* **PABAK** (prevalence- and bias-adjusted kappa, Byrt et al. 1993) is ``2·po − 1`` for two
  categories, the Brennan–Prediger coefficient ``(q·po − 1)/(q − 1)`` for ``q``.

Every coefficient is a function of *sufficient statistics that add up over units*: the
contingency table of a rater pair, or, for several raters with missing labels, per-unit
agreement shares, category shares and the coincidence matrix. Sums over a dialogue are
computed once; a dialogue-clustered bootstrap replicate is then a weighted sum of those
per-dialogue vectors (one matrix product for all replicates), and a design-weighted
(Horvitz–Thompson) estimate is the same sum with inclusion weights. The closed forms are
checked against the ``krippendorff`` and ``irrCAC`` packages in the tests (to 1e-9) and against
published worked examples. Undefined values are NaN inside this module and ``None`` in
reports.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

COEFFICIENTS: tuple[str, ...] = ("kappa", "ac1", "alpha", "pabak")
"""The chance-corrected coefficients every comparison reports, in display order."""

_CHUNK = 256  # bootstrap replicates drawn at once, to bound memory on large data sets


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, else NaN (elementwise, no warnings)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


# --------------------------------------------------------------------------- two raters


def contingency(a: Sequence[Hashable], b: Sequence[Hashable],
                categories: Sequence[Hashable]) -> np.ndarray:
    """The q×q table of two raters' labels: ``table[i, j]`` counts units a put in category i
    and b in category j. Labels outside ``categories`` are an error."""
    if len(a) != len(b):
        raise ValueError("both raters must label the same units")
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)), dtype=float)
    for x, y in zip(a, b, strict=True):
        table[index[x], index[y]] += 1
    return table


def pair_statistics(tables: np.ndarray) -> dict[str, np.ndarray]:
    """Agreement (0–1), kappa, AC1, alpha and PABAK from contingency tables.

    ``tables`` has shape ``(..., q, q)`` (one table, or one per bootstrap replicate) and may
    hold weighted counts. Cohen's kappa: ``pe = Σ_k a_k b_k / n²`` from each rater's margins.
    Gwet's AC1: ``π_k = (a_k + b_k) / 2n``, ``pe = Σ_k π_k (1 − π_k) / (q − 1)``.
    Krippendorff's alpha (nominal): the coincidence matrix of a pair is ``T + Tᵀ``; with
    ``n_c`` its margins and ``N = 2n`` pairable values,
    ``α = 1 − (N − 1)(N − Σ_c o_cc) / (N² − Σ_c n_c²)``. PABAK: ``(q·po − 1)/(q − 1)``.
    """
    t = np.asarray(tables, dtype=float)
    q = t.shape[-1]
    n = t.sum(axis=(-2, -1))
    diagonal = np.trace(t, axis1=-2, axis2=-1)
    po = _ratio(diagonal, n)
    rows, cols = t.sum(axis=-1), t.sum(axis=-2)
    pe_kappa = _ratio((rows * cols).sum(axis=-1), n * n)
    pi = _ratio(rows + cols, 2 * n[..., None])
    pe_ac1 = (pi * (1 - pi)).sum(axis=-1) / (q - 1)
    values = 2 * n
    margins = rows + cols
    alpha = 1 - _ratio((values - 1) * (values - 2 * diagonal),
                       values * values - (margins * margins).sum(axis=-1))
    return {
        "agreement": po,
        "kappa": _ratio(po - pe_kappa, 1 - pe_kappa),
        "ac1": _ratio(po - pe_ac1, 1 - pe_ac1),
        "alpha": np.where(values > 1, alpha, np.nan),
        "pabak": (q * po - 1) / (q - 1),
    }


# --------------------------------------------------------------------------- several raters


def unit_counts(ratings: Sequence[Sequence[Hashable | None]],
                categories: Sequence[Hashable]) -> np.ndarray:
    """Per unit, how many raters chose each category: shape (units, q). ``None`` = no label.

    ``ratings[u][r]`` is rater r's label of unit u (the layout of irrCAC's raw data).
    """
    index = {c: i for i, c in enumerate(categories)}
    counts = np.zeros((len(ratings), len(categories)), dtype=float)
    for u, labels in enumerate(ratings):
        for label in labels:
            if label is not None:
                counts[u, index[label]] += 1
    return counts


def group_vectors(counts: np.ndarray) -> np.ndarray:
    """Additive per-unit statistics of several raters with missing labels, shape (units, m).

    Columns: ``[rated, pairable, pa_u, π_u (q), o_u (q·q)]`` where ``rated`` = the unit has at
    least one label, ``pairable`` = at least two, ``pa_u`` = share of agreeing rater pairs on
    the unit (Gwet's per-unit agreement), ``π_u = r_uk / r_u`` and ``o_u`` the unit's
    contribution to Krippendorff's coincidence matrix, ``r_uc (r_uk − δ_ck) / (r_u − 1)``.
    """
    counts = np.asarray(counts, dtype=float)
    units, q = counts.shape
    r = counts.sum(axis=1)
    rated = (r >= 1).astype(float)
    pairable = (r >= 2).astype(float)
    pa = np.where(pairable > 0,
                  _ratio((counts * (counts - 1)).sum(axis=1), r * (r - 1)), 0.0)
    pi = np.where(rated[:, None] > 0, _ratio(counts, r[:, None]), 0.0)
    outer = counts[:, :, None] * counts[:, None, :]
    outer -= counts[:, :, None] * np.eye(q)[None, :, :]
    coincidence = np.where(pairable[:, None, None] > 0,
                           _ratio(outer, (r - 1)[:, None, None]), 0.0)
    return np.concatenate([rated[:, None], pairable[:, None], pa[:, None], pi,
                           coincidence.reshape(units, q * q)], axis=1)


def group_statistics(sums: np.ndarray, q: int) -> dict[str, np.ndarray]:
    """Agreement, AC1, alpha and PABAK (Brennan–Prediger) of several raters, from summed
    :func:`group_vectors` (shape ``(..., m)``). Kappa needs rater identities, so it is NaN.

    Gwet (2014) with missing labels: ``pa`` = mean ``pa_u`` over pairable units;
    ``π_k`` = mean ``r_uk / r_u`` over rated units; ``pe = Σ π_k(1 − π_k)/(q − 1)``.
    Alpha from the summed coincidence matrix as in :func:`pair_statistics`.
    """
    s = np.asarray(sums, dtype=float)
    rated, pairable, pa_sum = s[..., 0], s[..., 1], s[..., 2]
    pi = _ratio(s[..., 3:3 + q], rated[..., None])
    o = s[..., 3 + q:].reshape(*s.shape[:-1], q, q)
    pa = _ratio(pa_sum, pairable)
    pe_ac1 = (pi * (1 - pi)).sum(axis=-1) / (q - 1)
    values = o.sum(axis=(-2, -1))
    margins = o.sum(axis=-1)
    diagonal = np.trace(o, axis1=-2, axis2=-1)
    alpha = 1 - _ratio((values - 1) * (values - diagonal),
                       values * values - (margins * margins).sum(axis=-1))
    return {
        "agreement": pa,
        "kappa": np.full(np.shape(pa), np.nan),
        "ac1": _ratio(pa - pe_ac1, 1 - pe_ac1),
        "alpha": np.where(values > 1, alpha, np.nan),
        "pabak": (q * pa - 1) / (q - 1),
    }


# --------------------------------------------------------------------------- point estimates


def _none_if_nan(value: Any) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable],
                categories: Sequence[Hashable] = (0, 1)) -> float | None:
    """Cohen's kappa of two raters; None when chance agreement is 1 (undefined)."""
    return _none_if_nan(pair_statistics(contingency(a, b, categories))["kappa"])


def gwet_ac1(ratings: Sequence[Sequence[Hashable | None]],
             categories: Sequence[Hashable] = (0, 1)) -> float | None:
    """Gwet's AC1 of any number of raters (``ratings[unit][rater]``, None = missing)."""
    vectors = group_vectors(unit_counts(ratings, categories)).sum(axis=0)
    return _none_if_nan(group_statistics(vectors, len(categories))["ac1"])


def pabak(a: Sequence[Hashable], b: Sequence[Hashable],
          categories: Sequence[Hashable] = (0, 1)) -> float | None:
    """PABAK of two raters (Brennan–Prediger for more than two categories)."""
    return _none_if_nan(pair_statistics(contingency(a, b, categories))["pabak"])


def krippendorff_alpha(ratings: Sequence[Sequence[Hashable | None]],
                       categories: Sequence[Hashable] = (0, 1)) -> float | None:
    """Krippendorff's alpha (nominal) of any number of raters, from the coincidence matrix.

    ``ratings[unit][rater]`` with None for a missing label. None when undefined: fewer than
    two pairable values, or every pairable value in one category (no expected disagreement).
    The tests check it against the ``krippendorff`` package to 1e-9 (that package is GPL-3.0,
    so dst-judge, MIT, uses it only in its tests).
    """
    units = [row for row in ratings if sum(v is not None for v in row) >= 2]
    if not units or len({v for row in units for v in row if v is not None}) < 2:
        return None
    vectors = group_vectors(unit_counts(units, categories)).sum(axis=0)
    return _none_if_nan(group_statistics(vectors, len(categories))["alpha"])


# --------------------------------------------------------------------------- resampling


def resample_dialogues(n_dialogues: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each dialogue is drawn in each bootstrap replicate, shape (n_boot, n_dialogues).

    Each replicate draws ``n_dialogues`` dialogues with replacement; every turn of a drawn
    dialogue comes along, which is what a weight per dialogue expresses.
    """
    draws = rng.integers(0, n_dialogues, size=(n_boot, n_dialogues))
    counts = np.zeros((n_boot, n_dialogues), dtype=np.int64)
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1)
    return counts


def cluster_bootstrap(per_cluster: np.ndarray, n_boot: int,
                      rng: np.random.Generator) -> np.ndarray:
    """Sums of per-cluster statistic vectors (C, m) over ``n_boot`` resamples of the clusters
    with replacement: shape (n_boot, m). Integer input gives integer sums."""
    per_cluster = np.asarray(per_cluster)
    n_clusters = per_cluster.shape[0]
    out = np.zeros((n_boot, per_cluster.shape[1]), dtype=per_cluster.dtype)
    for start in range(0, n_boot, _CHUNK):
        stop = min(n_boot, start + _CHUNK)
        out[start:stop] = resample_dialogues(n_clusters, stop - start, rng) @ per_cluster
    return out


def stratified_bootstrap(per_unit: np.ndarray, strata: Sequence[Hashable],
                         weights: np.ndarray, n_boot: int,
                         rng: np.random.Generator) -> np.ndarray:
    """Weighted sums of per-unit vectors over resamples that redraw each stratum's units with
    replacement (``n_h`` draws from ``n_h``), keeping each unit's design weight: (n_boot, m).

    This is the bootstrap of a stratified sample: it varies what the design varies (which
    units of each stratum were drawn) and nothing else.
    """
    per_unit = np.asarray(per_unit, dtype=float) * np.asarray(weights, dtype=float)[:, None]
    out = np.zeros((n_boot, per_unit.shape[1]))
    groups: dict[Hashable, list[int]] = {}
    for i, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(i)
    for members in groups.values():
        block = per_unit[members]
        for start in range(0, n_boot, _CHUNK):
            stop = min(n_boot, start + _CHUNK)
            out[start:stop] += resample_dialogues(len(members), stop - start, rng) @ block
    return out


def percentile_interval(replicates: np.ndarray, confidence: float) -> list[float] | None:
    """Percentile interval over the replicates where the statistic is defined."""
    replicates = np.asarray(replicates, dtype=float)
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return [float(low), float(high)]
