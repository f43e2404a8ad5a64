"""Prediction-powered estimates: a system's accuracy from the judge on every turn plus a small
random sample of human labels.

The estimand is a metric over the judged run's *own* units (a finite population: the judge
scored every one of them) as a person would have scored it, e.g. TSA = the share of turns whose
predicted turn state a person calls correct. Three estimates answer it:

* ``judge``: the judge's own figure over every unit. It has no sampling error, but it carries
  the judge's bias, which no interval computed from the judge alone can cover.
* ``labels``: the stratified (Horvitz–Thompson / ratio) estimate from the labelled units alone.
* ``ppi``: PPI++ (Angelopoulos et al. 2023) in its finite-population form, which survey
  statistics calls the difference estimator: per stratum h,
  ``θ_h = λ·F_h/T_h + Σ_s (y − λ·f) / Σ_s t`` where ``F_h``, ``T_h`` are the judge's total and
  the number of turns of the stratum (known for every unit), ``y``, ``f``, ``t`` a labelled
  unit's human total, judge total and turns. ``λ = 0`` gives ``labels``, ``λ = 1`` plain PPI;
  the power-tuning ``λ`` minimises the estimated variance, clipped to [0, 1]. Strata combine
  with weights ``T_h / T`` (stratified PPI, Fisch et al. 2024, with one pooled ``λ``).

Variance is the design variance of sampling without replacement: per stratum
``(1 − n_h/N_h) · S²_e / (n_h · t̄_h²)`` with ``e`` the linearised residual
``y − λf − r̂·t`` (``t̄_h = T_h/N_h``). With dialogues as units (``t`` = turns of a dialogue)
this is the interval clustered by dialogue; with turns as units ``t = 1`` and it is the plain
one. Its t quantile takes Satterthwaite's degrees of freedom for the sizes drawn (Bell and
McCaffrey's small-sample correction for clustered variances): ``m − 1`` with equal sizes,
fewer when a few long dialogues carry most of the variance.
A difference of two systems labelled on one shared sample is the same estimate of
``y_A − y_B`` with ``f_A − f_B``.

Small samples: ``λ`` estimated from the same labels it then weighs makes the estimate slightly
biased and its variance slightly optimistic. The default ``tuning="loo"`` gives each labelled
unit a ``λ`` estimated *without* it (leave-one-out, closed form from sums), so each unit's term
is unbiased given its ``λ``; ``"plain"`` uses one ``λ`` for all (the textbook PPI++), and a
number fixes ``λ``. For one run the interval is re-centred: four pseudo-units, one in each
cell of the label × judge table (Agresti–Coull's "plus four" when λ = 0), enter its centre and
its variance, so that it holds near 0 and 100 % where the sample share's own variance is
smallest exactly when the share is most wrong; a sample without an error (or a success)
reaches its Clopper–Pearson bound, and with dialogues as units the pseudo-units scale with the
design effect and the interval is at least Korn and Graubard's exact one
(:mod:`._intervals`). For a difference of two runs (0 on most units, so a residual variance
far below a corner's) pseudo-units enter only where the sample's own variance estimate is 0,
with Agresti–Min's full weight (0.5 for each of 16 cells). No weight is
fitted to data. ``bench/ppi_coverage.py`` and ``bench/ppi_edges.py`` measure the coverage.

Every function works on arrays with leading batch axes (``(..., n)``), so the coverage bench
computes thousands of samples in one call of the same code the reports use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from .._errors import DataMismatchError, OptionError
from ._intervals import (
    INTERVAL_METHOD,
    exact_bound,
    jackknife_shift,
    korn_graubard,
    satterthwaite_df,
)
from ._labels import Resolution, TurnKey, row_key
from ._reports import SampleEstimates
from ._sampling import Sample, Strata, UnitKey, sample_strata

TuningName = Literal["loo", "plain"]
Tuning = TuningName | float
TUNINGS: tuple[TuningName, ...] = ("loo", "plain")

JUDGE_NOTE = ("the judge's own figure over every unit: no sampling error, but it carries the "
              "judge's bias, and no interval computed from the judge alone can cover that bias")


CORNERS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.25), (0.0, 1.0, 0.25), (1.0, 0.0, 0.25), (1.0, 1.0, 0.25))
"""One run: every cell of the label × judge 2×2 table, equally."""

DIFFERENCE_CORNERS: tuple[tuple[float, float, float], ...] = tuple(
    (dy, df, wy * wf) for dy, wy in ((-1.0, 0.25), (0.0, 0.5), (1.0, 0.25))
    for df, wf in ((-1.0, 0.25), (0.0, 0.5), (1.0, 0.25)))
"""Two runs: every cell of the (label A, label B, judge A, judge B) table equally, seen
through the differences ``y_A − y_B`` and ``f_A − f_B``."""

PSEUDO_UNITS = 4.0
"""Total weight of the corner pseudo-units for one run: one per cell of the label × judge
table, so that with λ = 0 they are two successes and two failures, Agresti and Coull's "plus
four" (z² ≈ 4 at 95 %), which keeps a binomial interval's coverage near its level from 2 % to
98 % where the plain interval fails near the ends."""

DIFFERENCE_PSEUDO_UNITS = 8.0
"""Total weight for a difference of two runs: Agresti–Min's 0.5 for each of the 16 cells of the
(label A, label B, judge A, judge B) table. A difference of two systems is 0 on most units, so
these pseudo-units would swamp its small residual variance; they enter only where the sample's
own estimate of that variance is 0 (``only_degenerate``): a sample in which no unit shows the
residual's spread, e.g. every labelled difference equals the judge's. Elsewhere the plain
design variance is used."""


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 at 0.95)."""
    if isinstance(confidence, bool) or not 0.0 < float(confidence) < 1.0:
        raise OptionError(f"confidence must lie strictly between 0 and 1 (got {confidence!r})")
    return NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)


def check_tuning(tuning: Any) -> Tuning:
    """``loo``, ``plain`` or a fixed λ in [0, 1]."""
    if isinstance(tuning, str):
        if tuning in TUNINGS:
            return tuning
        try:
            tuning = float(tuning)
        except ValueError:
            raise OptionError(f"tuning must be one of {', '.join(TUNINGS)} or a number in "
                              f"[0, 1] (got {tuning!r})") from None
    if isinstance(tuning, bool) or not isinstance(tuning, int | float) or not 0 <= tuning <= 1:
        raise OptionError(f"a fixed λ must be a number in [0, 1] (got {tuning!r})")
    return float(tuning)


# --------------------------------------------------------------------------- population


@dataclass(frozen=True)
class Stratum:
    """What the judge tells about one stratum of the population (every unit was judged).

    ``units`` N_h, ``turns`` T_h (the sum of unit sizes), ``judge`` F_h (the judge's total),
    ``judge_spread`` the variance (ddof 1) over the stratum's units of ``f − (F_h/T_h)·t``:
    the judge's part of the residual, known exactly, so ``λ`` need not estimate it.
    """

    units: int
    turns: float
    judge: float
    judge_spread: float

    @classmethod
    def of(cls, judge: Sequence[float] | np.ndarray,
           sizes: Sequence[float] | np.ndarray | None = None) -> Stratum:
        f = np.asarray(judge, dtype=float)
        t = np.ones_like(f) if sizes is None else np.asarray(sizes, dtype=float)
        if f.size == 0:
            raise ValueError("a stratum needs at least one unit")
        ratio = f.sum() / t.sum()
        spread = float(np.var(f - ratio * t, ddof=1)) if f.size > 1 else 0.0
        return cls(int(f.size), float(t.sum()), float(f.sum()), spread)


def t_value(confidence: float, df: float | np.ndarray) -> np.ndarray:
    """The two-sided Student-t quantile of a confidence level at ``df`` degrees of freedom
    (the normal quantile where ``df`` is infinite)."""
    from scipy.stats import t as student

    z_value(confidence)
    df = np.asarray(df, dtype=float)
    level = 0.5 + float(confidence) / 2.0
    return np.where(np.isfinite(df), student.ppf(level, np.maximum(df, 1.0)),
                    NormalDist().inv_cdf(level))


@dataclass
class DesignEstimate:
    """Value, standard error, λ and degrees of freedom of one estimator; arrays of the batch
    shape. ``df`` is the number of labelled units minus the number of strata (at least 1)
    when units have equal sizes (turns); with dialogues of unequal sizes it is each stratum's
    Satterthwaite df (:func:`_satterthwaite`, at most ``m_h − 1``) summed, one per sample of
    the batch. The interval takes Student's t quantile at ``df``, which matters with few units
    (at 10 dialogues t is 2.26 where the normal quantile is 1.96).

    ``centre``: where the interval is centred (the estimate re-centred on the sample plus its
    pseudo-units; ``value`` when there are none). ``clean``: +1 for a sample whose labelled
    units show no error, −1 for one without a success, 0 otherwise; ``units`` the labelled
    units. A clean sample's interval reaches its Clopper–Pearson bound
    (:func:`~judge.analysis._intervals.exact_bound`)."""

    value: np.ndarray
    se: np.ndarray
    lam: np.ndarray
    df: float | np.ndarray = float("inf")
    centre: np.ndarray | None = None
    clean: np.ndarray | None = None
    units: int = 0
    turns: float = 0.0

    def quantile(self, confidence: float) -> np.ndarray:
        return t_value(confidence, self.df)

    def interval(self, confidence: float) -> tuple[np.ndarray, np.ndarray]:
        q = self.quantile(confidence)
        centre = self.value if self.centre is None else self.centre
        low, high = centre - q * self.se, centre + q * self.se
        if self.clean is not None:
            bound = exact_bound(self.units, confidence)
            low = np.where(self.clean > 0, np.minimum(low, bound), low)
            high = np.where(self.clean > 0, np.maximum(high, 1.0), high)
            high = np.where(self.clean < 0, np.maximum(high, 1.0 - bound), high)
            low = np.where(self.clean < 0, np.minimum(low, 0.0), low)
        if self.turns > self.units:  # dialogues of several turns: clustered shares
            exact_low, exact_high = korn_graubard(self.value, self.se, self.df, self.turns,
                                                  confidence)
            low, high = np.minimum(low, exact_low), np.maximum(high, exact_high)
        return np.minimum(low, self.value), np.maximum(high, self.value)


def _sums(y: np.ndarray, f: np.ndarray, t: np.ndarray) -> dict[str, np.ndarray]:
    return {"y": y.sum(-1), "f": f.sum(-1), "t": t.sum(-1), "yf": (y * f).sum(-1),
            "yt": (y * t).sum(-1), "ft": (f * t).sum(-1), "tt": (t * t).sum(-1)}


def _covariance(s: dict[str, np.ndarray], m: int | np.ndarray) -> np.ndarray:
    """Sample covariance (ddof 1) of ``y − R_y·t`` and ``f − R_f·t`` from sums over m units."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ry, rf = s["y"] / s["t"], s["f"] / s["t"]
        cross = s["yf"] - rf * s["yt"] - ry * s["ft"] + ry * rf * s["tt"]
        out = cross / (np.asarray(m) - 1)
    return np.where(np.asarray(m) >= 2, np.nan_to_num(out), 0.0)


def design_estimate(y: np.ndarray, f: np.ndarray, t: np.ndarray | None,
                    groups: Sequence[np.ndarray | slice], strata: Sequence[Stratum], *,
                    tuning: Tuning = "loo",
                    corners: Sequence[tuple[float, float, float]] | None = None,
                    pseudo_units: float = PSEUDO_UNITS,
                    only_degenerate: bool = False, recentre: bool = True) -> DesignEstimate:
    """The stratified difference estimate of ``Σ y / Σ t`` over the population.

    ``y``, ``f``, ``t`` have shape ``(..., n)``: the human total, judge total and size of each
    labelled unit (``t`` None: every unit is one turn). ``groups[h]`` picks stratum h's
    columns, ``strata[h]`` its population facts. ``tuning`` is ``"loo"``, ``"plain"`` or a
    fixed λ (0 = labels only). A stratum with one labelled unit of several has no variance
    estimate: its standard error is NaN. A stratum without labels is an error.

    ``corners``: pseudo-units ``(y, f, share)`` with total weight ``pseudo_units`` (spread over
    strata by their labelled share): :data:`CORNERS` for one run, :data:`DIFFERENCE_CORNERS`
    for the difference of two. ``y`` and ``f`` of a corner are shares of a unit's turns: with
    dialogues as units a pseudo-unit is a dialogue of the stratum's mean size whose turns fall
    in the cells independently. With ``recentre`` (one run) they enter the interval's centre
    and its variance as Agresti and Coull (1998) add two successes and two failures to a
    binomial sample ("plus four"): the interval is centred on the sample plus its pseudo-units,
    which moves it away from 0 and 100 % where the sample share's own variance is smallest
    exactly when it is most wrong; the point estimate ``value`` is not moved. Without
    ``recentre`` they enter the variance only. ``only_degenerate``: use them only for samples
    (of the batch) whose variance estimate without them is 0 (differences of two runs).

    With units of unequal sizes (dialogues) the ratio's small-sample bias is removed by the
    jackknife (:func:`~judge.analysis._intervals.jackknife_shift`), from the value and the
    centre alike.
    """
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    if only_degenerate and corners is not None:
        bare = design_estimate(y, f, t, groups, strata, tuning=tuning)
        guarded = design_estimate(y, f, t, groups, strata, tuning=tuning, corners=corners,
                                  pseudo_units=pseudo_units, recentre=False)
        zero = bare.se <= _DEGENERATE_SE
        return DesignEstimate(bare.value, np.where(zero, guarded.se, bare.se), bare.lam,
                              bare.df)
    recentre = recentre and corners is not None
    t = np.ones_like(y) if t is None else np.broadcast_to(np.asarray(t, dtype=float), y.shape)
    total = sum(s.turns for s in strata)
    parts = []
    for columns, stratum in zip(groups, strata, strict=True):
        yh, fh, th = y[..., columns], f[..., columns], t[..., columns]
        m = yh.shape[-1]
        if m == 0:
            raise ValueError("every stratum needs at least one labelled unit")
        mean_size = stratum.turns / stratum.units
        share = stratum.turns / total
        fpc = max(0.0, 1.0 - m / stratum.units)
        weight = share ** 2 * fpc / (m * mean_size ** 2)
        parts.append((yh, fh, th, m, stratum, share, weight))
    lam = _tuning(parts, tuning)
    labelled = sum(p[3] for p in parts)
    value = np.zeros(y.shape[:-1])
    centre = np.zeros(y.shape[:-1])
    variance = np.zeros(y.shape[:-1])
    freedom: list[np.ndarray] = []
    for index, (yh, fh, th, m, stratum, share, weight) in enumerate(parts):
        lam_h = lam[index]
        rho = stratum.judge / stratum.turns
        terms = yh - lam_h * (fh - rho * th)
        theta = terms.sum(-1) / th.sum(-1)
        bias = jackknife_shift(terms, th, max(0.0, 1.0 - m / stratum.units))
        active = corners is not None and m >= 2
        base = pseudo_units * m / labelled if active else 0.0
        pseudo: float | np.ndarray = base
        if recentre and active:
            # pseudo-*turns*, times the design effect of the labels (dialogues only)
            pseudo = base * _design_effect(yh, th, base, mean_size) / mean_size
        middle = theta
        if recentre and active:
            lam_bar = lam_h.mean(-1)
            added = sum(c_share * (c_y - lam_bar * (c_f - rho))
                        for c_y, c_f, c_share in corners or ())
            middle = ((terms.sum(-1) + pseudo * mean_size * added)
                      / (th.sum(-1) + pseudo * mean_size))
            weight = weight * m / (m + pseudo)  # Agresti–Coull's n + 4 in the variance
        residual = terms - middle[..., None] * th
        # each squared residual over its shrinkage: a unit of size t has leverage t/Σt in the
        # ratio fit, so (m − 1)/m / (1 − t/Σt) is 1 for equal sizes (the usual ddof-1
        # variance) and larger for big units, whose residuals the fit pulls in most
        leverage = th / th.sum(-1, keepdims=True)
        shrink = (m - 1.0) / m / np.maximum(1.0 - leverage, 1e-12) if m >= 2 else 1.0
        squares, dof = (residual ** 2 * shrink).sum(-1), m - 1.0
        freedom.append(_satterthwaite(th, shrink) if m >= 2 else np.zeros(theta.shape))
        if active:
            for corner_y, corner_f, corner_share in corners or ():
                corner = corner_y - lam_h.mean(-1) * (corner_f - rho) - middle
                squares = squares + pseudo * corner_share * mean_size * corner ** 2
            dof += pseudo
        spread = squares / dof if m >= 2 else np.full(theta.shape, np.nan)
        value = value + share * (theta - bias)
        centre = centre + share * (middle - bias)
        variance = variance + (0.0 if np.all(weight == 0) else weight * spread)
    every = np.concatenate([np.broadcast_to(lam_h, p[0].shape)
                            for lam_h, p in zip(lam, parts, strict=True)], axis=-1)
    df = np.maximum(1.0, sum(freedom, np.zeros(y.shape[:-1])))
    clean = None
    if recentre:
        correct = np.all(np.abs(y - t) <= 1e-9, axis=-1)
        wrong = np.all(np.abs(y) <= 1e-9, axis=-1)
        clean = np.where(correct, 1, np.where(wrong, -1, 0))
    return DesignEstimate(value, np.sqrt(variance), every.mean(-1),
                          float(df) if df.ndim == 0 else df, centre=centre, clean=clean,
                          units=labelled,
                          turns=float(t.sum(-1).mean()) if recentre else 0.0)


def _design_effect(y: np.ndarray, t: np.ndarray, pseudo: float, mean_size: float
                   ) -> np.ndarray:
    """Kish's design effect of the labels' ratio ``Σy/Σt`` over dialogues: the variance of the
    dialogue totals about the ratio, per turn, over a turn's binomial variance, both at the
    share re-centred on ``pseudo`` pseudo-turns (so a sample without an error still has a
    variance to divide by), clipped to ``[1, mean_size]``: at least the turns' own plus-four,
    at most four whole pseudo-dialogues (turns of a dialogue moving as one, as JGA's running
    product makes them). Turns as units (``mean_size`` 1) give 1. The pseudo-units of a
    clustered sample are ``pseudo·deff`` turns: Agresti–Coull on the effective sample size,
    as Korn and Graubard (1998) apply Clopper–Pearson to it."""
    if mean_size <= 1.0 or t.shape[-1] < 2:
        return np.ones(t.shape[:-1])
    share = (y.sum(-1) + 0.5 * pseudo) / (t.sum(-1) + pseudo)
    spread = ((y - share[..., None] * t) ** 2).sum(-1) / (t.shape[-1] - 1.0)
    binomial = np.maximum(share * (1.0 - share), 1e-12) * mean_size
    return np.asarray(np.clip(spread / binomial, 1.0, mean_size))


SIZE_POWER = 2.0
"""The working model of :func:`_satterthwaite`: a unit's residual variance grows with the
square of its size (turns of one dialogue moving together, as JGA's running product makes
them); of the usual choices (size to the power 0, 1 or 2) the one that gives the fewest
degrees of freedom, hence the widest t quantile, when sizes differ."""


def _satterthwaite(t: np.ndarray, shrink: np.ndarray | float) -> np.ndarray:
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


_DEGENERATE_SE = 1e-12
"""A standard error this small is a residual variance estimated as 0 (rounding aside)."""


def _tuning(parts: list[tuple[Any, ...]], tuning: Tuning) -> list[np.ndarray]:
    """λ of every labelled unit, per stratum, shape (..., m_h) each.

    The optimal pooled λ minimises ``Σ_h w_h·Var_h(u − λv)``: ``Σ w_h C_h / Σ w_h V_h`` with
    ``C_h`` the sampled covariance of the human and judge residuals and ``V_h`` the judge
    residual's variance over the whole stratum (known). Leave-one-out drops a unit's own
    contribution to its stratum's ``C_h``.
    """
    if not isinstance(tuning, str):
        return [np.full(p[0].shape, float(tuning)) for p in parts]
    denominator = sum(weight * stratum.judge_spread
                      for _, _, _, _, stratum, _, weight in parts)
    sums = [_sums(yh, fh, th) for yh, fh, th, *_ in parts]
    numerator = sum(p[6] * _covariance(s, p[3]) for p, s in zip(parts, sums, strict=True))

    def clip(num: np.ndarray) -> np.ndarray:
        if denominator <= 0:
            return np.zeros(np.shape(num))
        return np.clip(num / denominator, 0.0, 1.0)

    if tuning == "plain":
        lam = clip(np.asarray(numerator))
        return [np.broadcast_to(lam[..., None], p[0].shape) for p in parts]
    out = []
    for p, s in zip(parts, sums, strict=True):
        yh, fh, th, m, _, _, weight = p
        without = {"y": s["y"][..., None] - yh, "f": s["f"][..., None] - fh,
                   "t": s["t"][..., None] - th, "yf": s["yf"][..., None] - yh * fh,
                   "yt": s["yt"][..., None] - yh * th, "ft": s["ft"][..., None] - fh * th,
                   "tt": s["tt"][..., None] - th * th}
        own = weight * _covariance(s, m)
        out.append(clip(np.asarray(numerator)[..., None] - own[..., None]
                        + weight * _covariance(without, m - 1)))
    return out


# --------------------------------------------------------------------------- PPI++ reference


def ppi_mean(y: Sequence[float] | np.ndarray, f: Sequence[float] | np.ndarray,
             f_unlabelled: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
             lam: float | None = None) -> dict[str, Any]:
    """PPI++ for a mean as the paper states it (a superpopulation: ``n`` labelled draws and
    ``N`` further unlabelled draws, all independent), with power tuning clipped to [0, 1].

    This is the reference form that ``ppi_py.ppi_mean_ci`` computes (the tests compare them to
    1e-6). Runs use :func:`design_estimate` instead, whose population is the run's own turns.
    """
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    g = np.asarray(f_unlabelled, dtype=float)
    n, big_n = y.size, g.size
    if n < 2 or f.size != n or big_n < 1:
        raise OptionError("PPI needs at least two labelled units with a prediction each and "
                          "at least one unlabelled prediction")
    if lam is None:
        centred_y, centred_f = y - y.mean(), f - f.mean()
        covariance = 2.0 * (centred_y @ centred_f) / n
        spread = np.var(np.concatenate([f, g]), ddof=1)
        lam = float(np.clip(covariance / (2.0 * (1.0 + n / big_n) * spread), 0.0, 1.0)) \
            if spread > 0 else 0.0
    value = lam * g.mean() + (y - lam * f).mean()
    se = np.sqrt((lam * g).var() / big_n + (y - lam * f).var() / n)
    z = z_value(confidence)
    return {"value": float(value), "ci": [float(value - z * se), float(value + z * se)],
            "se": float(se), "lambda": float(lam), "n_labelled": n, "n_unlabelled": big_n}


# --------------------------------------------------------------------------- planning


def labels_needed(spread: float, width: float, population: int, confidence: float) -> int:
    """Labelled units for a two-sided interval of full ``width`` when the per-unit variance
    is ``spread`` (sampling without replacement from ``population`` units)."""
    if width <= 0:
        raise OptionError(f"the width must be positive (got {width!r})")
    z = z_value(confidence)
    infinite = 4.0 * z * z * spread / (width * width)
    return int(min(population, np.ceil(infinite / (1.0 + infinite / population))))


# --------------------------------------------------------------------------- runs and samples


METRICS_BY_UNIT: dict[str, tuple[str, ...]] = {"turn": ("tsa",),
                                                "dialogue": ("tsa", "jga", "success")}
"""What each sampling unit makes estimable: turn designs TSA only; whole dialogues also JGA
(read as: every turn so far correct) and dialogue success (every turn correct)."""

_MAX_EXAMPLES = 20


def _metric(labels: Sequence[int], metric: str) -> tuple[float, float]:
    """A unit's total and size under a metric, from its turns' 0/1 labels in turn order."""
    if metric == "tsa":
        return float(sum(labels)), float(len(labels))
    if metric == "jga":
        return float(np.cumprod(labels).sum()), float(len(labels))
    return float(all(labels)), 1.0


@dataclass
class _Units:
    """Population units of a sample's design with the judge's 0/1 verdicts of their turns."""

    strata: Strata
    unit: str
    judge: dict[UnitKey, list[int]]
    keys: dict[UnitKey, list[TurnKey]]


def _population_units(strata: Strata, unit: str, rows: Sequence[Mapping[str, Any]],
                      what: str) -> _Units:
    judge: dict[UnitKey, list[int]] = {}
    keys: dict[UnitKey, list[TurnKey]] = {}
    for key, indices in strata.rows.items():
        ordered = sorted(indices, key=lambda i: int(rows[i]["turn_index"]))
        verdicts = [v for i in ordered if isinstance(v := rows[i].get("verdict"), bool)]
        if len(verdicts) < len(ordered):
            raise DataMismatchError(f"{what} has no judge verdict for a turn of the sampled "
                                    f"population ({key!r}); retry its error turns first")
        judge[key] = [int(v) for v in verdicts]
        keys[key] = [row_key(rows[i]) for i in ordered]
    return _Units(strata, unit, judge, keys)


def _figure(estimate: DesignEstimate | None, confidence: float, scale: float, low: float,
            n_labelled: int, n_turns: float, **extra: Any) -> dict[str, Any]:
    if estimate is None:
        return {"value": None, "ci": None, "n_labelled": n_labelled, "n_turns": int(n_turns),
                **extra}
    value, se = float(estimate.value), float(estimate.se)
    ci = None
    if np.isfinite(se):
        bottom, top = estimate.interval(confidence)
        ci = [max(low, scale * float(bottom)), min(scale, scale * float(top))]
    method = (INTERVAL_METHOD + (KORN_GRAUBARD if estimate.turns > estimate.units else "")
              if estimate.centre is not None else PLAIN_METHOD)
    return {"value": scale * value, "ci": ci, "n_labelled": n_labelled,
            "n_turns": int(n_turns), "se": scale * se if np.isfinite(se) else None,
            "df": float(estimate.df), "method": method, **extra}


PLAIN_METHOD = ("Student-t interval around the estimate (design variance; pseudo-units only "
                "where the sample's own variance estimate is 0)")
KORN_GRAUBARD = ("; for dialogue shares at least Korn and Graubard's Clopper–Pearson interval "
                 "at the effective sample size")


def _estimate_metric(units: list[_Units], human: list[Mapping[TurnKey, int]], metric: str,
                     sampled: dict[str, list[UnitKey]], confidence: float,
                     tuning: Tuning) -> dict[str, Any]:
    """Judge, labels and PPI figures of one metric; with two runs, of their difference."""
    strata = units[0].strata
    difference = len(units) == 2
    population: list[Stratum] = []
    ys: list[float] = []
    fs: list[float] = []
    ts: list[float] = []
    groups: list[np.ndarray] = []
    labelled = 0
    missing: list[str] = []
    for name, members in strata.members.items():
        f_all, t_all = [], []
        for unit in members:
            values = [_metric(u.judge[unit], metric) for u in units]
            f_all.append(values[0][0] - (values[1][0] if difference else 0.0))
            t_all.append(values[0][1])
        population.append(Stratum.of(f_all, t_all))
        start = len(ys)
        for unit in sampled.get(name, []):
            per_run = []
            for u, labels in zip(units, human, strict=True):
                got = [g for k in u.keys[unit] if (g := labels.get(k)) is not None]
                if len(got) < len(u.keys[unit]):
                    break
                per_run.append((_metric(got, metric), _metric(u.judge[unit], metric)))
            else:
                (y0, t0), (f0, _) = per_run[0]
                ys.append(y0 - (per_run[1][0][0] if difference else 0.0))
                fs.append(f0 - (per_run[1][1][0] if difference else 0.0))
                ts.append(t0)
        groups.append(np.arange(start, len(ys)))
        labelled += len(ys) - start
        if len(ys) == start:
            missing.append(name)
    total_turns = sum(s.turns for s in population)
    judge_value = sum(s.judge for s in population) / total_turns
    scale, low = 100.0, (-100.0 if difference else 0.0)
    out: dict[str, Any] = {
        "judge": {"value": scale * judge_value, "ci": None, "n_labelled": 0,
                  "n_turns": int(sum(len(u) for u in units[0].keys.values())),
                  "note": JUDGE_NOTE},
    }
    common = {"n_labelled": labelled, "n_turns": out["judge"]["n_turns"]}
    if missing:
        reason = (f"no labelled {units[0].unit} in stratum "
                  f"{', '.join(repr(m) for m in missing)}: its units cannot be estimated")
        out["labels"] = {"value": None, "ci": None, **common, "note": reason}
        out["ppi"] = {"value": None, "ci": None, **common, "note": reason}
        return out
    y, f, t = np.array(ys), np.array(fs), np.array(ts)
    corners = DIFFERENCE_CORNERS if difference else CORNERS
    pseudo = DIFFERENCE_PSEUDO_UNITS if difference else PSEUDO_UNITS
    plain = design_estimate(y, f, t, groups, population, tuning=0.0, corners=corners,
                            pseudo_units=pseudo, only_degenerate=difference)
    ppi = design_estimate(y, f, t, groups, population, tuning=tuning, corners=corners,
                          pseudo_units=pseudo, only_degenerate=difference)
    out["labels"] = _figure(plain, confidence, scale, low, **common)
    out["ppi"] = {**_figure(ppi, confidence, scale, low, **common),
                  "lambda": float(ppi.lam),
                  "tuning": tuning if isinstance(tuning, str) else "fixed"}
    census = labelled >= sum(len(m) for m in strata.members.values())
    warning = None if census else small_sample_warning(units[0].unit, labelled)
    for key in ("labels", "ppi"):
        if out[key]["ci"] is None:
            out[key]["note"] = ("a stratum has a single labelled unit of several, so no "
                                "variance estimate: no interval")
        if warning is not None:
            out[key]["warning"] = warning
    return out


def sample_estimates(sample: Sample, runs: Sequence[Sequence[Mapping[str, Any]]],
                     human: Sequence[Mapping[TurnKey, int]], *, confidence: float = 0.95,
                     tuning: Tuning = "loo", names: Sequence[str] | None = None,
                     resolutions: Sequence[Resolution] | None = None,
                     drawn_from: Sequence[Mapping[str, Any]] | None = None
                     ) -> SampleEstimates:
    """Judge, labels-only and PPI estimates of a run's metrics from a sample file and human
    labels (``human[i]``: turn key → 0/1 majority label of run i's predictions).

    With one run: TSA (and JGA, dialogue success for a whole-dialogue sample). With two runs
    judged on the same dialogues and labelled on the same sample: the difference run 0 − run 1.
    ``drawn_from`` are the rows of the run the sample was drawn from (default: run 0): its
    strata are the design's, whichever runs are estimated (a domain or judge-rule stratum is a
    fact of that run, not of another system's predictions). Only labels of turns the sample
    lists enter; the others are named as left out.
    ``resolutions[i]`` (:meth:`HumanLabels.resolve`) say how run i's labels were reached: the
    sampled turns its reviewers split on or were all unsure of are then named apart from the
    unlabelled ones, with the estimates were every such turn correct, and every one wrong.
    """
    tuning = check_tuning(tuning)
    z_value(confidence)
    if len(runs) not in (1, 2) or len(human) != len(runs):
        raise OptionError("estimates take one run, or two runs for a difference, each with "
                          "its labels")
    if len(runs) == 2 and sample.design == "judge-rule":
        raise OptionError(JUDGE_RULE_DIFFERENCE)
    source = runs[0] if drawn_from is None else drawn_from
    strata = sample_strata(sample, source)
    names = list(names or [f"run {i + 1}" for i in range(len(runs))])
    units = []
    for rows, name in zip(runs, names, strict=False):
        if rows is source:
            units.append(_population_units(strata, sample.unit, rows, name))
            continue
        mirrored = Strata(strata.members, {}, strata.verdicts, 0)
        index = {row_key(r): i for i, r in enumerate(rows)}
        for unit, indices in strata.rows.items():
            keys = [row_key(source[i]) for i in indices]
            if any(k not in index for k in keys):
                raise DataMismatchError(
                    f"{name} does not hold every turn of the sampled population "
                    f"({unit!r}): judge both systems on the same dialogues")
            mirrored.rows[unit] = [index[k] for k in keys]
        units.append(_population_units(mirrored, sample.unit, rows, name))
    sampled: dict[str, list[UnitKey]] = {}
    for turn in sample.turns:
        if turn.unit_key not in sampled.get(turn.stratum, []):
            sampled.setdefault(turn.stratum, []).append(turn.unit_key)
    listed = {turn.key for turn in sample.turns}
    left_out = sorted({k for labels in human for k in labels if k not in listed})
    undecided = [r.undecided() for r in resolutions] if resolutions else [{} for _ in human]
    unlabelled = [t for t in sample.turns
                  if any(t.key not in labels and t.key not in open_
                         for labels, open_ in zip(human, undecided, strict=True))]
    estimates = {metric: _estimate_metric(units, list(human), metric, sampled, confidence,
                                          tuning)
                 for metric in METRICS_BY_UNIT[sample.unit]}
    undecided_block = _undecided(sample, units, list(human), undecided, resolutions, sampled,
                                 confidence, tuning, len(runs) == 2)
    return {
        "design": sample.describe(),
        "confidence": confidence,
        "tuning": tuning if isinstance(tuning, str) else float(tuning),
        "difference": f"{names[0]} - {names[1]}" if len(runs) == 2 else None,
        "estimates": estimates,
        "left_out": {"count": len(left_out), "reason": "labels of turns the sample file does "
                     "not list count for agreement but not for these estimates",
                     "examples": [{"dialogue_id": d, "turn_index": t}
                                  for d, t in left_out[:_MAX_EXAMPLES]]},
        "unlabelled_sampled_turns": {"count": len(unlabelled), "examples": [
            {"dialogue_id": t.dialogue_id, "turn_index": t.turn_index}
            for t in unlabelled[:_MAX_EXAMPLES]]},
        "undecided_sampled_turns": undecided_block,
        "assumptions": ASSUMPTIONS,
    }


def _undecided(sample: Sample, units: list[_Units], human: list[Mapping[TurnKey, int]],
               undecided: list[dict[TurnKey, str]], resolutions: Sequence[Resolution] | None,
               sampled: dict[str, list[UnitKey]], confidence: float, tuning: Tuning,
               difference: bool) -> dict[str, Any]:
    """Sampled turns with labels but no decision (reviewers split, or all unsure): counted
    and named, how the labels were reached, and the estimates were every such turn correct
    and every one wrong (for a difference A − B: every one in A's favour, and in B's)."""
    listed = list(dict.fromkeys(t.key for t in sample.turns))
    kinds: dict[str, list[TurnKey]] = {"tied": [], "unsure": []}
    for key in listed:
        states = {open_[key] for open_ in undecided if key in open_}
        for state in sorted(states):
            kinds[state].append(key)
    how: dict[str, int] = {"majority": 0, "adjudicated": 0}
    for resolution in resolutions or []:
        for key in listed:
            if key in resolution.how:
                how[resolution.how[key]] += 1
    spelled = {t.key: t.dialogue_id for t in sample.turns}
    out: dict[str, Any] = {
        kind: {"count": len(keys), "examples": [{"dialogue_id": spelled[k], "turn_index": k[1]}
                                                for k in keys[:_MAX_EXAMPLES]]}
        for kind, keys in kinds.items()}
    count = len({k for keys in kinds.values() for k in keys})
    out["count"] = count
    out["labels_by"] = how
    out["treatment"] = (
        f"labels: {how['majority']} sampled turn(s) by the reviewers' majority, "
        f"{how['adjudicated']} adjudicated; {count} sampled turn(s) on which the reviewers "
        "split or were all unsure are left out of the estimates (as if missing at random "
        "within their stratum), and the bounds give the estimates were every one of them "
        + ("in the first run's favour and every one in the second's" if difference
           else "correct and every one wrong"))
    out["bounds"] = None
    if count:
        fills = ((1, 0), (0, 1)) if difference else ((1,), (0,))
        bounds: dict[str, Any] = {}
        drawn = set(listed)
        for name, fill in zip(("upper", "lower"), fills, strict=True):
            filled: list[Mapping[TurnKey, int]] = [
                {**labels, **{k: value for k in open_ if k in drawn}}
                for labels, open_, value in zip(human, undecided, fill, strict=False)]
            for metric in METRICS_BY_UNIT[sample.unit]:
                figures = _estimate_metric(units, filled, metric, sampled, confidence, tuning)
                entry = bounds.setdefault(metric, {})
                entry[name] = {k: figures[k] for k in ("labels", "ppi")}
        out["bounds"] = bounds
        out["bounds_meaning"] = (
            "upper: every such turn counted correct for the first run and wrong for the "
            "second; lower: the reverse" if difference else
            "upper: every such turn counted correct; lower: every one counted wrong")
    return out


JUDGE_RULE_DIFFERENCE = (
    "a judge-rule sample cannot give the difference of two systems: its strata are one "
    "system's judge × RULE verdicts with equal allocation, so the largest strata get few "
    "labels, and inside them the difference (0 on most turns) is a rare event whose variance "
    "those few labels badly underestimate; its 95 % intervals covered only 86-92 % of "
    "samples at 50-200 labels (bench/ppi_coverage.py). Draw the shared sample with "
    "'labels sample --design random' (or --design domain) and label it for every run")


def small_sample_warning(unit: str, labelled: int) -> str | None:
    """A warning when fewer units are labelled than the bench shows the interval to need."""
    minimum = MIN_DIALOGUES if unit == "dialogue" else MIN_TURNS
    if labelled >= minimum:
        return None
    return (f"only {labelled} labelled {unit}s: below {minimum} the bench has not shown this "
            "interval to reach its stated coverage (it may cover less often); label more "
            f"{unit}s before relying on it")


ASSUMPTIONS = (
    "labels and ppi: the sample file's design was followed (units drawn at random within each "
    "stratum, before anyone saw a label), and sampled units left unlabelled are missing at "
    "random within their stratum. Intervals (one run): Student's t, centred on the sample plus "
    "four pseudo-units (one per cell of the label × judge table: Agresti–Coull's 'plus four'), "
    "with degrees of freedom the labelled units less the strata for turns, and Satterthwaite's "
    "for the dialogue sizes drawn for whole dialogues; a sample with no error (or no success) "
    "reaches its Clopper–Pearson bound, and a dialogue share at least Korn and Graubard's "
    "Clopper–Pearson interval at its effective sample size. Whole-dialogue ratios are "
    "jackknifed for their small-sample bias. Differences of two runs: Student's t around the "
    "estimate. judge: none about the sample, but it is the judge's figure, not a person's.")


PLAN_SHARE = 0.8
"""The planner's promise: the interval is at most the asked width in this share of samples."""

PLAN_SAMPLES = 600
"""Simulated samples per candidate size when planning (a fixed seed: the plan is repeatable)."""

PLAN_AIM = 0.85
"""The share the planner's own simulation aims at: above :data:`PLAN_SHARE` by about three
standard errors of a share estimated from :data:`PLAN_SAMPLES` samples, so that the promise
holds in fresh samples too, not only in the ones the planner drew."""

MIN_TURNS = 50
"""The smallest simple random sample of turns at which the bench measured the 95 % intervals
to cover at least 93 % (``bench/ppi_coverage.py`` on the shared data at every judge quality,
``bench/ppi_edges.py`` at true TSA from 2 % to 98 %). A floor, not a guarantee: below it the
report warns, and the planner never suggests fewer; above it coverage is what the bench
measured on those populations, not a promise for every run."""

MIN_DIALOGUES = 25
"""The same for whole-dialogue samples: the fewest dialogues at which the bench measured
coverage ≥ 93 % for TSA, JGA and dialogue success."""


def _cell_sample(counts: np.ndarray, n: int, samples: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` simple random samples of ``n`` turns from a population given by the counts
    of its (label, judge) cells ``[(0,0), (0,1), (1,0), (1,1)]``: arrays y, f of (samples, n).
    The order of turns inside a sample does not matter to any estimate."""
    drawn = rng.multivariate_hypergeometric(counts.astype(np.int64), n, size=samples)
    bounds = drawn.cumsum(axis=1)
    cell = (np.arange(n)[None, :, None] >= bounds[:, None, :]).sum(axis=-1)
    return (cell >= 2).astype(float), (cell % 2 == 1).astype(float)


def interval_widths(counts: np.ndarray, n: int, *, tuning: Tuning, confidence: float = 0.95,
                    samples: int = PLAN_SAMPLES, seed: int = 0) -> np.ndarray:
    """Full widths (shares, unclipped) of the interval over simulated simple random samples
    of ``n`` turns from a population of (label, judge) cell counts, computed by the same
    estimator the reports use (``tuning`` 0.0 = labels alone)."""
    counts = np.asarray(counts, dtype=np.int64)
    population = int(counts.sum())
    if n >= population:
        return np.zeros(samples)
    judge = float(counts[1] + counts[3])
    p = judge / population
    stratum = Stratum(population, float(population), judge,
                      p * (1 - p) * population / max(1, population - 1))
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, samples, _PLAN_BATCH):  # batches bound the memory of a large n
        y, f = _cell_sample(counts, n, min(_PLAN_BATCH, samples - start), rng)
        estimate = design_estimate(y, f, None, [slice(None)], [stratum], tuning=tuning,
                                   corners=CORNERS)
        low, high = estimate.interval(confidence)
        out.append(high - low)
    return np.concatenate(out)


_PLAN_BATCH = 150


def plan_size(counts: np.ndarray, width: float, *, tuning: Tuning, confidence: float = 0.95,
              minimum: int = MIN_TURNS, share: float = PLAN_AIM) -> int:
    """The smallest n (at least ``minimum``, at most the population) whose interval is at most
    ``width`` (a share) wide in at least ``share`` of simulated simple random samples."""
    population = int(np.sum(counts))
    low = min(minimum, population)

    def reaches(n: int) -> bool:
        widths = interval_widths(counts, n, tuning=tuning, confidence=confidence)
        return float(np.quantile(widths, share)) <= width

    if reaches(low):
        return low
    high = min(2 * low, population)  # doubling first: small sizes are cheap to simulate
    while high < population and not reaches(high):
        low, high = high, min(2 * high, population)  # a census has no sampling error
    while high - low > 1:
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle
    return high


def assumed_cells(population: int, judge_share: float, disagreement: float) -> np.ndarray:
    """Cell counts ``[(0,0), (0,1), (1,0), (1,1)]`` (label, judge) of a run whose judge calls
    ``judge_share`` of turns correct and disagrees with people on ``disagreement`` of the turns
    of either verdict alike."""
    p, d = judge_share, disagreement
    shares = np.array([(1 - p) * (1 - d), p * d, (1 - p) * d, p * (1 - d)])
    counts = np.floor(shares * population).astype(np.int64)
    order = np.argsort(-(shares * population - counts), kind="stable")
    counts[order[: population - int(counts.sum())]] += 1
    return counts


PLAN_CRITERION = ("the suggested n gives an interval at most the asked width in at least "
                  f"{PLAN_SHARE:.0%} of simple random samples (simulated with the estimator "
                  "the reports use), and is never below the smallest sample for which the "
                  f"bench shows the interval to hold ({MIN_TURNS} turns)")


PILOT_LEVEL = 0.9
"""One-sided confidence of the bounds a pilot's rates are planned on (:func:`pilot_bound`)."""

PILOT_CRITERION = (
    f"; from a pilot, the plan takes the pilot's disagreement at its one-sided "
    f"{PILOT_LEVEL:.0%} upper bound and its TSA at the {PILOT_LEVEL:.0%} bound nearer 50 %, so "
    "that a pilot which happened to show too few disagreements does not promise too much (the "
    "bench found such plans kept for 80 % or more of 50-turn pilots; planning on the "
    "pilot's own shares kept them for about half)")


def pilot_bound(shares: np.ndarray, labelled: int, level: float = PILOT_LEVEL) -> np.ndarray:
    """The (label, judge) cell shares ``[(0,0), (0,1), (1,0), (1,1)]`` to plan on from a
    pilot's (weighted) shares: the disagreement at its one-sided ``level`` Clopper–Pearson
    upper bound (split between the two directions as the pilot split it; evenly when it
    showed none), the people's TSA at its Wilson bound nearer 50 % (the share whose variance is
    largest among those the pilot does not rule out). A plan on the pilot's own shares treats
    them as exact: it keeps its promise for about half the pilots."""
    from scipy.stats import beta, norm

    n = max(int(labelled), 1)
    disagree = float(shares[1] + shares[2])
    upper = float(beta.ppf(level, disagree * n + 1.0, max(n - disagree * n, 1e-9)))
    upper = min(max(upper, disagree), 1.0)
    tsa = float(shares[2] + shares[3])
    z = float(norm.ppf(level))
    centre = (tsa + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(tsa * (1 - tsa) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    toward = centre - half if tsa > 0.5 else centre + half
    tsa = min(max(toward, min(tsa, 0.5)), max(tsa, 0.5))
    split = shares[1] / disagree if disagree > 0 else 0.5
    c01, c10 = upper * split, upper * (1.0 - split)
    c11 = max(tsa - c10, 0.0)
    c00 = max(1.0 - c01 - c10 - c11, 0.0)
    out = np.array([c00, c01, c10, c11])
    return out / out.sum()


def plan_labels(rows: Sequence[Mapping[str, Any]], *, width: float, confidence: float = 0.95,
                sample: Sample | None = None, human: Mapping[TurnKey, int] | None = None,
                disagreement: float | None = None) -> dict[str, Any]:
    """How many labelled turns give a TSA interval of full ``width`` (percentage points), for
    labels alone and for PPI, under simple random sampling of turns.

    The run is described by its share of turns in each (label, judge) cell: from a pilot
    (``sample`` + ``human``, weighted by the pilot's design), or from an assumed
    ``disagreement`` rate (the share of turns where judge and people differ, alike for either
    verdict of the judge). Each candidate n is simulated (:func:`interval_widths`) and the
    smallest n whose interval is at most ``width`` wide in :data:`PLAN_SHARE` of samples is
    suggested (the search aims at :data:`PLAN_AIM`, a margin for the simulation's own
    noise), never below :data:`MIN_TURNS`. A median-based figure would reach the width in
    only about half the samples; a disagreement of 0 still needs labels, because the interval
    must allow for disagreements the sample happened not to show.
    """
    if isinstance(width, bool) or not isinstance(width, int | float) or not 0 < width <= 100:
        raise OptionError(f"--width must be a number of percentage points in (0, 100] "
                          f"(got {width!r})")
    z_value(confidence)
    judged = [v for row in rows if isinstance(v := row.get("verdict"), bool)]
    if not judged:
        raise OptionError("the run has no judged turn")
    population = len(judged)
    p = sum(judged) / population
    out: dict[str, Any] = {"width": width, "confidence": confidence, "population": population,
                           "judge_tsa": 100.0 * p, "criterion": PLAN_CRITERION,
                           "share": PLAN_SHARE, "minimum": min(MIN_TURNS, population)}
    if (sample is None) == (disagreement is None):
        raise OptionError("plan from a pilot (--sample and --human) or from an assumed "
                          "--disagreement rate, not both and not neither")
    if disagreement is not None:
        if isinstance(disagreement, bool) or not 0 <= disagreement <= 1:
            raise OptionError(f"--disagreement must be a share in [0, 1] (got {disagreement!r})")
        counts = assumed_cells(population, p, disagreement)
        out["basis"] = {"disagreement": disagreement}
    else:
        if sample is None or human is None:  # (no sample and no disagreement: refused above)
            raise OptionError("a pilot needs its human labels (--human)")
        sample_strata(sample, rows)
        verdicts = rows_by_key(rows)
        labelled = [t for t in sample.turns if t.key in human]
        if len(labelled) < 2:
            raise OptionError("the pilot has fewer than two labelled turns; label more of it "
                              "first")
        per_stratum = Counter(t.stratum for t in labelled)
        shares = np.zeros(4)
        for t in labelled:
            shares[2 * human[t.key] + int(verdicts[t.key])] += (
                t.stratum_size / per_stratum[t.stratum])
        shares /= shares.sum()
        bounded = pilot_bound(shares, len(labelled))
        counts = np.floor(bounded * population).astype(np.int64)
        order = np.argsort(-(bounded * population - counts), kind="stable")
        counts[order[: population - int(counts.sum())]] += 1
        out["basis"] = {"pilot": sample.path, "labelled": len(labelled),
                        "weighted": True,
                        "disagreement": float(shares[1] + shares[2]),
                        "tsa": float(shares[2] + shares[3]),
                        "planned_disagreement": float(bounded[1] + bounded[2]),
                        "planned_tsa": float(bounded[2] + bounded[3]),
                        "bound_level": PILOT_LEVEL}
        out["criterion"] = PLAN_CRITERION + PILOT_CRITERION
    if population < MIN_TURNS:
        out["note"] = (f"the run has {population} judged turns, fewer than the {MIN_TURNS} at "
                       "which the bench shows the interval to hold, so the plan is to label "
                       "every turn: a census has no sampling error")
    plans: tuple[tuple[str, Tuning], ...] = (("labels", 0.0), ("ppi", "loo"))
    for key, tuning in plans:
        n = plan_size(counts, width / 100.0, tuning=tuning, confidence=confidence)
        widths = interval_widths(counts, n, tuning=tuning, confidence=confidence)
        out[key] = {"labels_needed": n,
                    "median_width": 100.0 * float(np.median(widths)),
                    "width_at_share": 100.0 * float(np.quantile(widths, PLAN_SHARE))}
    return out


def rows_by_key(rows: Sequence[Mapping[str, Any]]) -> dict[TurnKey, Any]:
    """Judge verdicts by turn key (turns without one left out)."""
    return {row_key(r): r["verdict"] for r in rows if isinstance(r.get("verdict"), bool)}
