"""A leaderboard of many DST systems whose comparisons keep their error rate: every figure
with an interval clustered by dialogue, every pair of systems compared on the same dialogues
(paired) with a multiplicity correction, rank intervals and groups that cannot be told apart,
and breakdowns by domain, turn position, dialogue length and seen/unseen values.

Memory: each system is scored on its own (its predictions loaded, scored, dropped) into a few
bytes per turn (:class:`judge.metrics.TurnVerdicts`, numpy columns); the statistics read
per-dialogue sums of those columns. So fifty systems cost fifty sets of columns, never fifty
sets of states. The CLI and (later) a service job call the same functions and return the same
JSON (:meth:`Leaderboard.to_json`). The systems are scored into those columns in
``_leaderboard_systems``; this module turns the columns into figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import OptionError
from .._glossary import CORRECTIONS, Correction
from ..metrics import (
    MetricOptions,
    gca_from_counts,
)
from ._clustered import (
    Clustered,
    Interval,
    adjust,
    difference,
    indistinct_groups,
    interval,
    jackknife_estimate,
    rank_intervals,
    ratio_estimate,
)
from ._leaderboard_systems import Layout, SystemKind, SystemTurns, _fga_lambda
from .reports import (
    BoardBreakdown,
    BoardFigure,
    BoardPair,
    BoardSystem,
    LabelledTsa,
    LeaderboardJson,
)

EXACT_METRICS = ("jga", "sa", "fga", "gca")
JUDGE_METRICS = ("tsa", "judge_jga")
METRIC_LABELS = {"jga": "JGA", "sa": "SA", "fga": "FGA", "gca": "GCA", "tsa": "TSA",
                 "judge_jga": "judge JGA"}
POSITION_BINS = ((1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, None))
LENGTH_BINS = ((1, 4), (5, 7), (8, 10), (11, 13), (14, None))
RATIO_METHOD = ("ratio over turns; CR1 cluster-robust variance by dialogue, Student t with "
                "G-1 df")
JACKKNIFE_METHOD = ("GCA of pooled counts; cluster jackknife variance (leave one dialogue "
                    "out), Student t with G-1 df")


# --- the figures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A value with its interval, in points (percent)."""

    value: float | None
    low: float | None
    high: float | None
    se: float | None

    @classmethod
    def of(cls, found: Interval) -> Figure:
        return cls(_points(found.value), _points(found.low), _points(found.high),
                   _points(found.se))

    def to_json(self) -> BoardFigure:
        return {"value": self.value, "ci": [self.low, self.high], "se": self.se}


def _points(share: float) -> float | None:
    return None if share is None or not np.isfinite(share) else 100.0 * float(share)


@dataclass
class SystemRow:
    name: str
    kind: SystemKind
    source: str
    metrics: dict[str, Figure]
    rank: int = 0
    rank_ci: tuple[int, int] = (0, 0)
    group: str = ""
    """Letters of the groups it belongs to (systems sharing a letter are not told apart)."""

    def to_json(self) -> BoardSystem:
        return {"name": self.name, "kind": self.kind, "source": self.source,
                "metrics": {k: f.to_json() for k, f in self.metrics.items()},
                "rank": self.rank, "rank_ci": list(self.rank_ci), "group": self.group}


@dataclass
class PairRow:
    """``a - b`` (a the system with the higher value), paired by dialogue."""

    a: str
    b: str
    metric: str
    difference: Figure
    p: float | None
    p_adjusted: float | None = None
    significant: bool = False

    def to_json(self) -> BoardPair:
        return {"a": self.a, "b": self.b, "metric": self.metric,
                "difference": self.difference.value,
                "ci": [self.difference.low, self.difference.high], "se": self.difference.se,
                "p": self.p, "p_adjusted": self.p_adjusted, "significant": self.significant}


@dataclass
class BreakdownRow:
    """One group of turns (a domain, a turn position, ...): each system's figure on it."""

    dimension: str
    group: str
    metric: str
    dialogues: int
    turns: int
    figures: dict[str, Figure]

    def to_json(self) -> BoardBreakdown:
        return {"dimension": self.dimension, "group": self.group, "metric": self.metric,
                "dialogues": self.dialogues, "turns": self.turns,
                "systems": {k: f.to_json() for k, f in self.figures.items()}}


@dataclass
class Leaderboard:
    """Systems (best first by the rank metric), pairs, breakdowns and the method."""

    systems: list[SystemRow]
    pairs: list[PairRow]
    breakdowns: list[BreakdownRow]
    method: dict[str, Any]
    labelled: LabelledTsa | None = None
    """Prediction-powered TSA from human labels (:func:`labelled_tsa`), when given."""

    @property
    def metrics(self) -> list[str]:
        return list(self.method["metrics"])

    @property
    def rank_metric(self) -> str:
        return str(self.method["rank_metric"])

    def to_json(self) -> LeaderboardJson:
        """The documented shape: ``systems``, ``pairs``, ``breakdowns``, ``method``;
        percentages in points."""
        out: LeaderboardJson = {"systems": [s.to_json() for s in self.systems],
               "pairs": [p.to_json() for p in self.pairs],
               "groups": self.method["groups"],
               "breakdowns": [b.to_json() for b in self.breakdowns],
               "method": self.method}
        if self.labelled is not None:
            out["labelled"] = self.labelled
        return out

    def write_json(self, path: str | Path) -> None:
        from .._io import write_text

        write_text(path, json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")


def metric_keys(versions: Sequence[str], judged: bool) -> list[tuple[str, str, str | None]]:
    """``(key, metric, version)`` of every column: ``jga`` for one gold version,
    ``jga@2.1``, ``jga@2.4`` for several; the judge's metrics when some system is a run."""
    keys: list[tuple[str, str, str | None]] = [
        (m if len(versions) == 1 else f"{m}@{v}", m, v) for v in versions for m in EXACT_METRICS]
    if judged:
        keys.extend((m, m, None) for m in JUDGE_METRICS)
    return keys


def _estimate(layout: Layout, system: SystemTurns, metric: str, version: str | None,
              options: MetricOptions) -> Clustered | None:
    g = layout.num_dialogues
    if version is None:
        column = system.tsa if metric == "tsa" else system.judge_jga
        if column is None:
            return None
        valid = column >= 0
        sums = np.bincount(layout.cluster, weights=(column == 1), minlength=g)
        counts = np.bincount(layout.cluster, weights=valid, minlength=g)
        return ratio_estimate(sums, counts)
    verdicts = system.golds[version]
    if metric == "gca":
        per_dialogue = np.stack([np.bincount(layout.cluster, weights=verdicts.changes[:, k],
                                             minlength=g) for k in range(4)], axis=1)
        return jackknife_estimate(per_dialogue, lambda totals: gca_from_counts(
            totals, alpha=options.alpha, undefined=options.undefined))
    values = {"jga": verdicts.jga, "sa": verdicts.sa, "fga": verdicts.fga}[metric]
    sums = np.bincount(layout.cluster, weights=values, minlength=g)
    return ratio_estimate(sums, layout.turns.astype(np.float64))


def build_leaderboard(layout: Layout, systems: Sequence[SystemTurns], *,
                      options: MetricOptions | None = None, confidence: float = 0.95,
                      correction: Correction = "holm", breakdowns: bool = True,
                      recorded: dict[str, Any] | None = None) -> Leaderboard:
    """Intervals, pairwise tests, ranks and breakdowns of ``systems`` (scored on ``layout``)."""
    options = options or MetricOptions()
    check_systems(systems)
    if not 0.5 <= confidence < 1:
        raise OptionError(f"--confidence must be in [0.5, 1), not {confidence}")
    if correction not in CORRECTIONS:
        raise OptionError(f"--correction must be one of {', '.join(CORRECTIONS)}")
    judged = any(s.kind == "run" for s in systems)
    keys = metric_keys(layout.versions, judged)
    estimates: dict[str, list[Clustered | None]] = {
        key: [_estimate(layout, s, metric, version, options) for s in systems]
        for key, metric, version in keys}
    rows = [SystemRow(s.name, s.kind, s.source, {
        key: Figure.of(interval(found, confidence))
        for key, _, _ in keys if (found := estimates[key][i]) is not None})
        for i, s in enumerate(systems)]
    pairs = _pairs(systems, estimates, confidence, correction)
    rank_key = keys[0][0]
    better = np.zeros((len(systems), len(systems)), dtype=bool)
    position = {s.name: i for i, s in enumerate(systems)}
    for pair in pairs:
        if pair.metric == rank_key and pair.significant:
            better[position[pair.a], position[pair.b]] = True
    ranked = estimates[rank_key]
    if any(found is None for found in ranked):  # the rank metric is one every system has
        raise OptionError(f"every system needs {rank_key} to be ranked")
    values = [found.value for found in ranked if found is not None]
    order = sorted(range(len(systems)), key=lambda i: (-values[i], i))
    for rank, i in enumerate(order, 1):
        rows[i].rank = rank
    for i, (low, high) in enumerate(rank_intervals(values, better)):
        rows[i].rank_ci = (low, high)
    groups = indistinct_groups(order, better)
    for letter, members in zip(_letters(len(groups)), groups, strict=True):
        for i in members:
            rows[i].group += letter
    method = {
        "confidence": confidence, "cluster": "dialogue", "dialogues": layout.num_dialogues,
        "turns": layout.num_turns, "versions": layout.versions,
        "metrics": {key: _metric_method(metric, version, options) for key, metric, version
                    in keys},
        "interval": RATIO_METHOD, "gca_interval": JACKKNIFE_METHOD,
        "pairs": ("paired difference on the same dialogues (a - b, a the higher), its CR1 "
                  "(jackknife for GCA) interval and two-sided t test with G-1 df"),
        "correction": correction,
        "correction_scope": "across all pairs of systems, separately for each metric",
        "alpha": round(1 - confidence, 10),
        "significant": ("a > b when the corrected p-value is below alpha" + (
            "" if correction == "holm" else " (BY controls the false discovery rate, so the "
            "rank intervals and groups hold per comparison, not jointly)")),
        "rank_metric": rank_key,
        "rank_interval": ("from the corrected pairwise tests of the rank metric: from 1 + the "
                          "systems significantly above to N - the systems significantly "
                          "below" + (" (simultaneous under Holm)" if correction == "holm"
                                     else "")),
        "groups": [[systems[i].name for i in members] for members in groups],
        "groups_method": ("systems in rank order; each longest run with no significant pair "
                          "of the rank metric inside is a group (a letter)"),
        "scale": "percent",
        **(recorded or {}),
    }
    board = Leaderboard([rows[i] for i in order], pairs, [], method)
    if breakdowns:
        board.breakdowns = _breakdowns(layout, systems, confidence)
        method["breakdowns"] = (
            "JGA on subsets of turns, same intervals: domain (turns of dialogues whose gold "
            "uses the domain; the state restricted to its slots), turn position (1-based), "
            "dialogue length (turns), seen/unseen (turns whose gold holds a value the "
            "training set does not"
            + (f", from {layout.seen_source})" if layout.seen_source else "; with --seen)"))
    return board


def _metric_method(metric: str, version: str | None, options: MetricOptions) -> str:
    gold = f" against gold {version}" if version else " (the judge's verdicts)"
    what = {"jga": "joint goal accuracy", "sa": "slot accuracy",
            "fga": f"flexible goal accuracy, lambda {_fga_lambda(options)}",
            "gca": "granular change accuracy", "tsa": "turn state accuracy",
            "judge_jga": "joint goal accuracy"}[metric]
    return what + gold + (", jackknife interval" if metric == "gca" else "")


def _letters(count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [letters[i] if i < 26 else f"{letters[i // 26 - 1]}{letters[i % 26]}"
            for i in range(count)]


def _pairs(systems: Sequence[SystemTurns], estimates: dict[str, list[Clustered | None]],
           confidence: float, correction: Correction) -> list[PairRow]:
    out: list[PairRow] = []
    for key, found in estimates.items():
        these: list[PairRow] = []
        for i in range(len(systems)):
            for j in range(i + 1, len(systems)):
                a, b = found[i], found[j]
                if a is None or b is None:
                    continue
                if b.value > a.value:
                    first, second, a, b = j, i, b, a
                else:
                    first, second = i, j
                result = difference(a, b, confidence)
                p = result.p if result.p is not None and np.isfinite(result.p) else None
                these.append(PairRow(systems[first].name, systems[second].name, key,
                                     Figure.of(result), p))
        adjusted = adjust([p.p if p.p is not None else float("nan") for p in these],
                          correction)
        alpha = 1 - confidence
        for pair, p_adj in zip(these, adjusted, strict=True):
            pair.p_adjusted = None if not np.isfinite(p_adj) else float(p_adj)
            pair.significant = bool(pair.p_adjusted is not None and pair.p_adjusted < alpha
                                    and (pair.difference.value or 0) > 0)
        out.extend(these)
    return out


def check_systems(systems: Sequence[SystemTurns]) -> None:
    """Two systems at least, each named once."""
    if len(systems) < 2:
        raise OptionError(f"a leaderboard compares systems: give at least two (got "
                          f"{len(systems)})")
    names = [s.name for s in systems]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OptionError(f"two systems are named {', '.join(repr(n) for n in twice)}: give "
                          "each a name of its own with --names")


# --- breakdowns ---------------------------------------------------------------------------


def _bin_label(low: int, high: int | None) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}-{high}"


def _subsets(layout: Layout, version: str) -> Iterable[tuple[str, str, np.ndarray,
                                                            np.uint32 | None]]:
    """``(dimension, group, turn mask, domain bit or None)`` of every breakdown."""
    shown = layout.position + 1
    for low, high in POSITION_BINS:
        mask = (shown >= low) & (shown <= (high if high is not None else 10**6))
        yield "position", _bin_label(low, high), mask, None
    length = layout.turns[layout.cluster]
    for low, high in LENGTH_BINS:
        mask = (length >= low) & (length <= (high if high is not None else 10**6))
        yield "length", _bin_label(low, high), mask, None
    used = layout.gold_domains[version][layout.cluster]
    for i, domain in enumerate(layout.domains):
        bit = np.uint32(1 << i)
        yield "domain", domain, (used & bit) != 0, bit
    if layout.unseen is not None:
        flags = layout.unseen[version]
        yield "values", "seen", ~flags, None
        yield "values", "unseen", flags, None


def _breakdowns(layout: Layout, systems: Sequence[SystemTurns],
                confidence: float) -> list[BreakdownRow]:
    out: list[BreakdownRow] = []
    g = layout.num_dialogues
    for version in layout.versions:
        key = "jga" if len(layout.versions) == 1 else f"jga@{version}"
        for dimension, group, mask, bit in _subsets(layout, version):
            if not mask.any():
                continue
            counts = np.bincount(layout.cluster, weights=mask, minlength=g)
            present = counts > 0
            figures = {}
            for system in systems:
                verdicts = system.golds[version]
                right = (verdicts.jga if bit is None
                         else (verdicts.domain_errors & bit) == 0)
                sums = np.bincount(layout.cluster, weights=right & mask, minlength=g)
                found = ratio_estimate(sums[present], counts[present])
                figures[system.name] = Figure.of(interval(found, confidence))
            out.append(BreakdownRow(dimension, group, key, int(present.sum()),
                                    int(mask.sum()), figures))
    return out
