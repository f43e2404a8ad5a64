"""Interval devices of the labels-only and prediction-powered estimates, one function each,
so that what each does (and why) can be read and tested on its own.

* :func:`exact_bound`: the Clopper–Pearson bound of a sample without an error (or without a
  success). Such a sample cannot rule out a true share down to ``(α/2)^(1/m)``; the interval
  is widened to reach it, whatever the t interval says.
* :func:`satterthwaite_df`: the degrees of freedom of a clustered variance estimate, in
  closed form (linear in the number of dialogues, where the matrix form is quadratic).
* :func:`satterthwaite`: the same for one stratum of a design estimate, under the working
  model that a dialogue's variance grows with the square of its size.
* :func:`design_effect`: Kish's design effect of a dialogue sample's share, which scales the
  pseudo-units of a clustered sample.
* :func:`korn_graubard`: the Clopper–Pearson interval at a clustered share's effective sample
  size.
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


def design_effect(y: np.ndarray, t: np.ndarray, pseudo: float, mean_size: float, *,
                  floor: float = 1.0, ceiling: float | None = None) -> np.ndarray:
    """Kish's design effect of the labels' ratio ``Σy/Σt`` over dialogues: the variance of the
    dialogue totals about the ratio, per turn, over a turn's binomial variance, both at the
    share re-centred on ``pseudo`` pseudo-turns (so a sample without an error still has a
    variance to divide by), clipped to ``[1, ceiling]``: at least the turns' own plus-four, at
    most what dialogues whose turns move as one would give (as JGA's running product makes
    them): ``mean_size`` for equal sizes, the population's ``mean(t²)/mean(t)`` for unequal
    ones (the caller's ``ceiling``), since long dialogues weigh more than their turns. Turns
    as units (``mean_size`` 1) give 1. The pseudo-units of a clustered sample are
    ``pseudo·deff`` turns: Agresti–Coull on the effective sample size, as Korn and Graubard
    (1998) apply Clopper–Pearson to it.

    ``floor``: a design effect known without sampling error (the judge's over the whole
    stratum). A sample that happens to hold few of the dialogues carrying the failures shows
    a small design effect exactly when its share is most wrong (JGA near 100 %); the judge's
    verdicts on every unit show how clustered the failures are, so the estimate is taken at
    least at that."""
    if mean_size <= 1.0 or t.shape[-1] < 2:
        return np.ones(t.shape[:-1])
    share = (y.sum(-1) + 0.5 * pseudo) / (t.sum(-1) + pseudo)
    spread = ((y - share[..., None] * t) ** 2).sum(-1) / (t.shape[-1] - 1.0)
    binomial = np.maximum(share * (1.0 - share), 1e-12) * mean_size
    top = mean_size if ceiling is None else max(ceiling, 1.0)
    return np.asarray(np.clip(np.maximum(spread / binomial, floor), 1.0, top))


SIZE_POWER = 2.0
"""The working model of :func:`satterthwaite`: a unit's residual variance grows with the
square of its size (turns of one dialogue moving together, as JGA's running product makes
them); of the usual choices (size to the power 0, 1 or 2) the one that gives the fewest
degrees of freedom, hence the widest t quantile, when sizes differ."""


def satterthwaite(t: np.ndarray, shrink: np.ndarray | float) -> np.ndarray:
    """Degrees of freedom of one stratum's variance estimate ``Σ a·e²`` (Satterthwaite's
    two-moment match, as Bell and McCaffrey (2002) use for clustered errors).

    ``t`` (shape ``(..., m)``) are the unit sizes, ``shrink`` the weights ``a`` on the squared
    residuals ``e = y − θ̂·t`` of the ratio fit. Under the working model ``Var(y) ∝ t^p``
    (:data:`SIZE_POWER`), ``e = P·ε`` and the estimate is a quadratic form with matrix
    ``B = A^½ G A^½``, ``G = P·diag(t^p)·Pᵀ``; its df is ``tr(B)² / tr(B²)``. With equal sizes
    that is exactly ``m − 1`` (the plain Student-t case, unchanged); with unequal sizes, a
    few big dialogues carry most of the residual variance, the variance estimate is itself
    noisier, and the df drop accordingly. This widens the interval only through the t
    quantile, and by an amount fixed by the design (the sizes), not by the labels.
    """
    t = np.asarray(t, dtype=float)
    m = t.shape[-1]
    flat = np.ptp(t, axis=-1) <= 1e-12 if m else np.ones(t.shape[:-1], dtype=bool)
    if np.all(flat):
        return np.full(t.shape[:-1], m - 1.0)
    df = satterthwaite_df(t, shrink, SIZE_POWER)
    df = np.where(np.isnan(df), m - 1.0, df)
    return np.where(flat, m - 1.0, np.minimum(df, m - 1.0))


def size_correction(t: np.ndarray, moment: float, power: float) -> np.ndarray:
    """The factor on a dialogue sample's residual variance for the sizes it missed:
    ``max(1, moment / mean(t^power))`` over the last axis, ``moment`` the population's mean of
    ``t^power`` (0: unknown, factor 1). Under the working model of :func:`satterthwaite` a
    dialogue's residual variance grows as ``t^power``, so the sample's squared residuals
    estimate ``σ²·mean_s(t^power)`` where the design variance needs ``σ²·mean_U(t^power)``. A
    sample that drew none of the few long dialogues (which carry most of the variance when
    accuracy falls with length) is both too high or low *and* too sure; the factor restores
    the variance the population's sizes imply. It never shrinks the variance."""
    if moment <= 0:
        return np.ones(t.shape[:-1])
    seen = (np.asarray(t, dtype=float) ** power).mean(-1)
    return np.asarray(np.maximum(1.0, moment / np.maximum(seen, 1e-300)))
