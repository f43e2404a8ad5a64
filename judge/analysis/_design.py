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
reaches its Clopper–Pearson bound. With dialogues as units (one run) further devices hold
the interval where a few dialogues carry most of the failures (:mod:`._intervals`): the
pseudo-units are four turns times the sample's design effect, taken at least at the judge's
own design effect over every dialogue of the stratum (known, no sampling error), and they
vary as the sample's dialogues do (Agresti–Coull on the effective sample size); the residual
variance is scaled up by the population's mean squared dialogue size over the sample's, when
the sample drew shorter dialogues than the population holds; and the interval is at least
Korn and Graubard's Clopper–Pearson interval at the effective sample size. For a difference
of two runs (0 on most units, so a residual variance far below a corner's) pseudo-units enter
only where the sample's own variance estimate is 0, with Agresti–Min's full weight (0.5 for
each of 16 cells). No weight is fitted to data. ``bench/ppi_coverage.py`` and
``bench/ppi_edges.py`` measure the coverage.

Every function works on arrays with leading batch axes (``(..., n)``), so the coverage bench
computes thousands of samples in one call of the same code the reports use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from .._errors import OptionError
from ._intervals import (
    SIZE_POWER,
    design_effect,
    exact_bound,
    jackknife_shift,
    korn_graubard,
    satterthwaite,
    size_correction,
)
from .reports import PpiMean

TuningName = Literal["loo", "plain"]
Tuning = TuningName | float
TUNINGS: tuple[TuningName, ...] = ("loo", "plain")

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
    size_moment: float = 0.0
    """The mean of ``t^SIZE_POWER`` over the stratum's units (0: not known, no correction)."""

    @property
    def judge_design_effect(self) -> float:
        """Kish's design effect of the judge's own share over every unit of the stratum (1 for
        turns, or when the judge's share is 0 or 1): no sampling error, so it shows the
        clustering a sample of few failures may hide (:func:`design_estimate`)."""
        mean_size = self.turns / self.units
        rho = self.judge / self.turns
        if mean_size <= 1.0 or not 0.0 < rho < 1.0:
            return 1.0
        return self.judge_spread / (rho * (1.0 - rho) * mean_size)

    @classmethod
    def of(cls, judge: Sequence[float] | np.ndarray,
           sizes: Sequence[float] | np.ndarray | None = None) -> Stratum:
        f = np.asarray(judge, dtype=float)
        t = np.ones_like(f) if sizes is None else np.asarray(sizes, dtype=float)
        if f.size == 0:
            raise ValueError("a stratum needs at least one unit")
        ratio = f.sum() / t.sum()
        spread = float(np.var(f - ratio * t, ddof=1)) if f.size > 1 else 0.0
        return cls(int(f.size), float(t.sum()), float(f.sum()), spread,
                   float(np.mean(t ** SIZE_POWER)))


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
    Satterthwaite df (:func:`satterthwaite`, at most ``m_h − 1``) summed, one per sample of
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
            if self.clean is not None:  # a clean sample has its exact bound (above) instead:
                # its share of 0 or 1 tells no design effect, so Korn–Graubard's effective
                # size would fall to one trial and the interval to [2.5, 100] %
                exact_low = np.where(self.clean != 0, low, exact_low)
                exact_high = np.where(self.clean != 0, high, exact_high)
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
        deff: float | np.ndarray = 1.0
        if recentre and active:
            # pseudo-*turns*, times the design effect of the labels (dialogues only), at least
            # the judge's over the whole stratum
            deff = design_effect(yh, th, base, mean_size, floor=stratum.judge_design_effect,
                                 ceiling=max(mean_size, stratum.size_moment / mean_size))
            pseudo = base * deff / mean_size
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
        freedom.append(satterthwaite(th, shrink) if m >= 2 else np.zeros(theta.shape))
        if recentre and mean_size > 1.0 and m >= 2:
            # one run over whole dialogues: the variance of the sizes the sample missed
            squares = squares * size_correction(th, stratum.size_moment, SIZE_POWER)
        if active:
            for corner_y, corner_f, corner_share in corners or ():
                corner = corner_y - lam_h.mean(-1) * (corner_f - rho) - middle
                # a pseudo-dialogue varies as the sample's dialogues do (its design effect):
                # Agresti–Coull's variance on the effective sample size
                squares = squares + pseudo * deff * corner_share * mean_size * corner ** 2
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
             lam: float | None = None) -> PpiMean:
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


MIN_TURNS = 50
"""The smallest simple random sample of turns at which the bench measured the 95 % intervals
to cover at least 93 % (``bench/ppi_coverage.py`` on the shared data at every judge quality,
``bench/ppi_edges.py`` at true TSA from 2 % to 98 %). A floor, not a guarantee: below it the
report warns, and the planner never suggests fewer; above it coverage is what the bench
measured on those populations, not a promise for every run."""

MIN_DIALOGUES = 25
"""The same for whole-dialogue samples: the fewest dialogues at which the bench measured
coverage ≥ 93 % for TSA, JGA and dialogue success."""
