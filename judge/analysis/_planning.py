"""How many labels to draw: the labelled turns that give an interval of a chosen width,
simulated with the estimator the reports use, from an assumed disagreement rate or from a
pilot sample (planned on a bound of the pilot's rates, not its point)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from .._errors import OptionError
from ._design import (
    CORNERS,
    MIN_TURNS,
    Stratum,
    Tuning,
    design_estimate,
    z_value,
)
from ._labels import TurnKey, row_key
from ._sample_check import sample_strata
from ._sampling import Sample
from .reports import LabelPlan


def labels_needed(spread: float, width: float, population: int, confidence: float) -> int:
    """Labelled units for a two-sided interval of full ``width`` when the per-unit variance
    is ``spread`` (sampling without replacement from ``population`` units)."""
    if width <= 0:
        raise OptionError(f"the width must be positive (got {width!r})")
    z = z_value(confidence)
    infinite = 4.0 * z * z * spread / (width * width)
    return int(min(population, np.ceil(infinite / (1.0 + infinite / population))))


PLAN_SHARE = 0.8
"""The planner's promise: the interval is at most the asked width in this share of samples."""

PLAN_SAMPLES = 600
"""Simulated samples per candidate size when planning (a fixed seed: the plan is repeatable)."""

PLAN_AIM = 0.85
"""The share the planner's own simulation aims at: above :data:`PLAN_SHARE` by about three
standard errors of a share estimated from :data:`PLAN_SAMPLES` samples, so that the promise
holds in fresh samples too, not only in the ones the planner drew."""

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
    batch = max(1, _PLAN_ELEMENTS // n)  # batches bound the memory of a large n; they
    for start in range(0, samples, batch):  # draw the same stream as one call would
        y, f = _cell_sample(counts, n, min(batch, samples - start), rng)
        estimate = design_estimate(y, f, None, [slice(None)], [stratum], tuning=tuning,
                                   corners=CORNERS)
        low, high = estimate.interval(confidence)
        out.append(high - low)
    return np.concatenate(out)


_PLAN_ELEMENTS = 250_000
"""Labelled turns simulated per call of the estimator (samples × n): one call for every
sample up to n ≈ 400, so that a plan (about twenty candidate sizes) is quick."""


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
                disagreement: float | None = None) -> LabelPlan:
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
    return cast(LabelPlan, out)


def rows_by_key(rows: Sequence[Mapping[str, Any]]) -> dict[TurnKey, Any]:
    """Judge verdicts by turn key (turns without one left out)."""
    return {row_key(r): r["verdict"] for r in rows if isinstance(r.get("verdict"), bool)}
