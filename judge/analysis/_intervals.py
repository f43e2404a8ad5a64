"""Interval devices of the labels-only and prediction-powered estimates, one function each,
so that what each does (and why) can be read and tested on its own.

* :func:`exact_bound`: the Clopper–Pearson bound of a sample without an error (or without a
  success). Such a sample cannot rule out a true share down to ``(α/2)^(1/m)``; the interval
  is widened to reach it, whatever the t interval says.
* :func:`satterthwaite_df`: the degrees of freedom of a clustered variance estimate, in
  closed form (linear in the number of dialogues, where the matrix form is quadratic).
* :func:`jackknife_shift`: the jackknife estimate of a ratio estimator's small-sample bias,
  which whole-dialogue samples of unequal sizes carry (JGA most: long dialogues score low).
"""

from __future__ import annotations

import numpy as np

INTERVAL_METHOD = (
    "Student-t interval re-centred on the sample plus pseudo-units (Agresti–Coull's 'plus "
    "four': one pseudo-unit in each cell of the label × judge table, in the centre and the "
    "variance); Clopper–Pearson bound when the labelled units show no error or no success")
"""The method, as the reports and the docs name it."""


def exact_bound(units: np.ndarray | int, confidence: float) -> np.ndarray:
    """The one-sided Clopper–Pearson bound at level ``1 − (1 − confidence)/2`` of a sample of
    ``units`` independent units every one of which succeeded: ``(α/2)^(1/m)``, the lowest
    share such a sample does not rule out (``1 −`` it for a sample without a success)."""
    alpha = (1.0 - float(confidence)) / 2.0
    m = np.maximum(np.asarray(units, dtype=float), 1.0)
    return np.asarray(alpha ** (1.0 / m))


def satterthwaite_df(t: np.ndarray, shrink: np.ndarray | float, power: float) -> np.ndarray:
    """``tr(B)² / tr(B²)`` for ``B = A^½ G A^½``, ``G = P·diag(t^power)·Pᵀ``, ``P = I − t·1ᵀ/T``
    (``A = diag(shrink)``), over the last axis of ``t``, without forming the m × m matrices.

    ``G = diag(v) + H`` with ``v = t^power`` and ``H = α(t vᵀ + v tᵀ) + β t tᵀ`` (``α = −1/T``,
    ``β = Σv / T²``), so ``tr(B²) = Σ a²v² + 2 Σ a² v H_ii + Σ_ij a_i a_j H_ij²`` and the last
    sum is a polynomial in the moments ``Σ a t²``, ``Σ a v²`` and ``Σ a t v``."""
    t = np.asarray(t, dtype=float)
    a = np.broadcast_to(np.asarray(shrink, dtype=float), t.shape)
    v = t ** power
    total = t.sum(-1, keepdims=True)
    alpha, beta = -1.0 / total, v.sum(-1, keepdims=True) / total ** 2
    h_diag = 2.0 * alpha * t * v + beta * t * t
    trace = (a * (v + h_diag)).sum(-1)
    s_tt, s_vv, s_tv = (a * t * t).sum(-1), (a * v * v).sum(-1), (a * t * v).sum(-1)
    alpha, beta = alpha[..., 0], beta[..., 0]
    square = ((a * a * (v * v + 2.0 * v * h_diag)).sum(-1)
              + alpha ** 2 * (2.0 * s_tt * s_vv + 2.0 * s_tv ** 2)
              + 4.0 * alpha * beta * s_tt * s_tv + beta ** 2 * s_tt ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(square > 0, trace ** 2 / np.where(square > 0, square, 1.0), np.nan)


def jackknife_shift(terms: np.ndarray, t: np.ndarray, fpc: float) -> np.ndarray:
    """Quenouille's jackknife estimate of the bias of the ratio ``Σ terms / Σ t`` over the last
    axis (the estimate minus it is unbiased to order 1/m²), times the finite-population
    correction ``fpc``: ``fpc·(m − 1)·(mean_i θ̂₍₋ᵢ₎ − θ̂)``. It is 0 when every unit has the
    same size (the ratio is then a mean, already unbiased)."""
    m = t.shape[-1]
    if m < 2 or fpc <= 0:
        return np.zeros(t.shape[:-1])
    big_s, big_t = terms.sum(-1, keepdims=True), t.sum(-1, keepdims=True)
    theta = big_s[..., 0] / big_t[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        without = (big_s - terms) / (big_t - t)
    without = np.where(np.isfinite(without), without, theta[..., None])
    return fpc * (m - 1.0) * (without.mean(-1) - theta)


def korn_graubard(value: np.ndarray, se: np.ndarray, df: np.ndarray | float, trials: float,
                  confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Korn and Graubard's (1998) Clopper–Pearson interval for a clustered share: the
    binomial exact interval at the effective sample size ``θ̂(1 − θ̂)/se²`` (at most
    ``trials``, the labelled turns), shrunk by ``(z/t_df)²`` for the degrees of freedom of the
    variance estimate. A sample of dialogues in which a few carry all the errors (JGA near
    100 %: one early error loses a whole dialogue) is then read as the handful of events it
    is, not as a mean with a symmetric error: with one such dialogue the upper bound on the
    loss is about 5.6 times the loss seen, as for one event in a binomial sample."""
    from scipy.stats import beta, norm
    from scipy.stats import t as student

    level = 0.5 + float(confidence) / 2.0
    value = np.clip(np.asarray(value, dtype=float), 0.0, 1.0)
    se = np.asarray(se, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(se > 0, value * (1.0 - value) / np.where(se > 0, se, 1.0) ** 2, trials)
    n = np.where(np.isfinite(n), n, trials)
    df = np.maximum(np.asarray(df, dtype=float), 1.0)
    shrink = (norm.ppf(level) / student.ppf(level, df)) ** 2
    n = np.clip(n * np.where(np.isfinite(df), shrink, 1.0), 1.0, float(trials))
    x = n * value
    with np.errstate(invalid="ignore"):
        low = np.where(x > 0, beta.ppf(1.0 - level, np.maximum(x, 1e-12), n - x + 1.0), 0.0)
        high = np.where(x < n, beta.ppf(level, x + 1.0, np.maximum(n - x, 1e-12)), 1.0)
    return np.nan_to_num(low, nan=0.0), np.nan_to_num(high, nan=1.0)
