"""Statistics clustered by dialogue: ratio estimates with a cluster-robust (CR1) variance,
paired differences, multiplicity corrections and rank intervals.

Turns of one dialogue are not independent (a slot missed at turn 3 stays missed), so every
variance here is a sum over dialogues. Each estimate is carried as its value and its
*influence* on each dialogue ``u_g`` (summing to zero): the variance is
``G/(G-1) · Σ u_g²`` and the variance of a paired difference is the same sum over
``u_g(A) - u_g(B)``, which keeps the pairing. For a mean over turns (JGA, slot accuracy, FGA,
TSA) ``u_g = (y_g - θ n_g) / N``, which makes the variance the textbook CR1 cluster-robust
variance of a regression on a constant (statsmodels' ``cov_type='cluster'``); for a statistic
that is not a mean (GCA) ``u_g`` comes from leaving each dialogue out in turn (the cluster
jackknife). Intervals use Student's t with G - 1 degrees of freedom.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .._glossary import Correction


@dataclass(frozen=True)
class Clustered:
    """An estimate and its influence on each dialogue (the input of every interval)."""

    value: float
    influence: np.ndarray

    @property
    def clusters(self) -> int:
        return int(self.influence.shape[-1])


@dataclass(frozen=True)
class Interval:
    """A value with its standard error and interval (shares, not points, until reported)."""

    value: float
    se: float
    low: float
    high: float
    df: int
    p: float | None = None
    """Two-sided p-value of "the value is 0" (differences only)."""


def ratio_estimate(sums: np.ndarray, counts: np.ndarray) -> Clustered:
    """``Σ y / Σ n`` over dialogues (``sums[g]`` = Σ of the metric over dialogue g's turns,
    ``counts[g]`` its turns) with its linearised influences."""
    total = float(counts.sum())
    if total == 0:
        return Clustered(float("nan"), np.zeros_like(sums, dtype=np.float64))
    value = float(sums.sum()) / total
    return Clustered(value, (sums - value * counts) / total)


def jackknife_estimate(per_cluster: np.ndarray,
                       statistic: Callable[[np.ndarray], np.ndarray]) -> Clustered:
    """A statistic of pooled per-dialogue quantities ``per_cluster[g, k]`` (e.g. GCA of the
    pooled counts), with influences from leaving each dialogue out: their CR1 sum is the
    cluster jackknife variance ``(G-1)/G · Σ (θ_(-g) - θ̄)²``."""
    clusters = per_cluster.shape[0]
    total = per_cluster.sum(axis=0)
    value = float(statistic(total[None, :])[0])
    left_out = statistic(total[None, :] - per_cluster)
    influence = (clusters - 1) / clusters * (np.mean(left_out) - left_out)
    return Clustered(value, influence)


def t_quantile(confidence: float, df: int) -> float:
    from scipy import stats  # loaded when an interval is drawn, not on import

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def interval(estimate: Clustered, confidence: float) -> Interval:
    """The estimate's CR1 interval with Student's t on G - 1 degrees of freedom."""
    return _interval(estimate.value, estimate.influence, confidence)


def difference(a: Clustered, b: Clustered, confidence: float) -> Interval:
    """``a - b`` on the same dialogues, paired: its interval and two-sided p-value."""
    return _interval(a.value - b.value, a.influence - b.influence, confidence, test=True)


def _interval(value: float, influence: np.ndarray, confidence: float, *,
              test: bool = False) -> Interval:
    clusters = influence.shape[-1]
    df = max(clusters - 1, 1)
    if not np.isfinite(value) or clusters < 2:
        nan = float("nan")
        return Interval(value, nan, nan, nan, df, nan if test else None)
    se = float(np.sqrt(clusters / (clusters - 1) * np.sum(influence**2)))
    half = t_quantile(confidence, df) * se
    p = None
    if test:
        from scipy import stats

        p = (float(2 * stats.t.sf(abs(value) / se, df)) if se > 0
             else (1.0 if value == 0 else 0.0))
    return Interval(value, se, value - half, value + half, df, p)


def differences(estimates: Sequence[Clustered], confidence: float
                ) -> list[tuple[int, int, Interval]]:
    """Every pair ``(i, j)``, ``i < j``, of ``estimates`` on the same dialogues, paired."""
    return [(i, j, difference(estimates[i], estimates[j], confidence))
            for i in range(len(estimates)) for j in range(i + 1, len(estimates))]


def adjust(p_values: Sequence[float], method: Correction = "holm") -> np.ndarray:
    """Adjusted p-values: Holm's step-down (family-wise error) or Benjamini–Yekutieli's
    step-up (false discovery rate under any dependence); NaN stays NaN."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(np.isfinite(p))
    m = valid.size
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    ranked = p[order]
    if method == "holm":
        scaled = np.minimum(1.0, (m - np.arange(m)) * ranked)
        adjusted = np.maximum.accumulate(scaled)
    elif method == "by":
        harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
        scaled = m * harmonic / np.arange(1, m + 1) * ranked
        adjusted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    else:
        raise ValueError(f"unknown correction {method!r}")
    out[order] = adjusted
    return out


def rank_intervals(values: Sequence[float], better: np.ndarray) -> list[tuple[int, int]]:
    """Rank intervals from pairwise decisions: ``better[i, j]`` says the corrected test finds
    system i above system j. System i ranks no better than 1 + (systems found above it) and no
    worse than N - (systems found below it); with Holm's correction all the intervals hold
    together with the family-wise confidence."""
    n = len(values)
    return [(1 + int(better[:, i].sum()), n - int(better[i, :].sum())) for i in range(n)]


def indistinct_groups(order: Sequence[int], better: np.ndarray) -> list[list[int]]:
    """Groups of systems no corrected test tells apart: in ``order`` (best first), each run of
    consecutive systems without a significant pair inside, the longest from each start, runs
    inside an earlier one dropped (the usual letters of a results table)."""
    groups: list[list[int]] = []
    n = len(order)
    for start in range(n):
        end = start
        while end + 1 < n and not any(
                better[order[k], order[end + 1]] or better[order[end + 1], order[k]]
                for k in range(start, end + 1)):
            end += 1
        members = list(order[start:end + 1])
        if not groups or not set(members) <= set(groups[-1]):
            groups.append(members)
    return groups
