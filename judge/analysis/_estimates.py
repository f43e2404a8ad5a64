"""Estimates of a run's metrics from a sample file and its human labels: the judge's own
figure, labels alone and prediction-powered, for one run or the difference of two, with the
sampled turns left out, unlabelled or undecided named apart. The arithmetic is
:func:`~judge.analysis._design.design_estimate`; this module maps a run's rows and a
sample's design onto it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .._errors import DataMismatchError, OptionError
from ._design import (
    CORNERS,
    DIFFERENCE_CORNERS,
    DIFFERENCE_PSEUDO_UNITS,
    MIN_DIALOGUES,
    MIN_TURNS,
    PSEUDO_UNITS,
    DesignEstimate,
    Stratum,
    Tuning,
    check_tuning,
    design_estimate,
    z_value,
)
from ._intervals import (
    INTERVAL_METHOD,
)
from ._labels import Resolution, TurnKey, row_key
from ._sample_check import sample_strata
from ._sampling import Sample, Strata, UnitKey
from .reports import MetricEstimates, SampleEstimates

JUDGE_NOTE = ("the judge's own figure over every unit: no sampling error, but it carries the "
              "judge's bias, and no interval computed from the judge alone can cover that bias")


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
KORN_GRAUBARD = ("; for dialogue shares the pseudo-units are four turns times the design "
                 "effect (at least the judge's over every dialogue), the variance is scaled for "
                 "dialogue sizes the sample missed, and the interval is at least Korn and "
                 "Graubard's Clopper–Pearson interval at the effective sample size")


def _estimate_metric(units: list[_Units], human: list[Mapping[TurnKey, int]], metric: str,
                     sampled: dict[str, list[UnitKey]], confidence: float,
                     tuning: Tuning) -> MetricEstimates:
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
        return cast(MetricEstimates, out)
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
    return cast(MetricEstimates, out)


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
    "reaches its Clopper–Pearson bound. A dialogue share (one run): the pseudo-units are four "
    "turns times the sample's design effect, at least the judge's over every dialogue of the "
    "stratum; the variance is scaled up when the sample drew shorter dialogues than the "
    "population holds (a dialogue's variance taken to grow with its squared size); the "
    "interval is at least Korn and Graubard's Clopper–Pearson interval at its effective sample "
    "size. Whole-dialogue ratios are jackknifed for their small-sample bias. Differences of "
    "two runs: Student's t around the "
    "estimate. judge: none about the sample, but it is the judge's figure, not a person's.")
