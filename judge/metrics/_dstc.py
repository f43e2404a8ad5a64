"""DSTC scored-hypothesis metrics (Williams et al., 2013: the first Dialog State Tracking
Challenge).

A tracker that outputs scored N-best lists is judged on more than its top guess: how much
probability it puts on the right answer (L2, avgp, neglogp), how high it ranks it (MRR), and
how well its top score separates right from wrong top guesses (ROC). Each slot and the joint
state are scored separately, under three schedules that choose which turns count.

Scores that leave mass unassigned give it to REST, the "no value (yet)" meta-hypothesis, as in
goal tracking (DSTC2): for a slot it is right exactly when the gold state lacks the slot, for
the joint state when the gold state is empty. When the gold value is not listed, the correct
hypothesis is absent (p = 0, MRR = 0): an empty list never scores as a right answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from ..data import NONE, State, turn_states
from ._matching import MatchPolicy
from ._types import HypDialogue

_MIN_P = 1e-4
"""Floor of ``p`` in ``-ln p``, so a missing correct hypothesis costs a finite amount."""
_REST_EPS = 1e-12
"""Unassigned mass below this is float noise (0.7 + 0.2 + 0.1), not a real REST hypothesis."""

_BASE_KEYS = ("n", "accuracy", "l2", "avgp", "neglogp", "mrr")

Metrics = dict[str, float | int | None]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sample:
    """One scored N-best list judged against the gold state, reduced to what the metrics need."""

    top_correct: bool
    top_score: float
    p: float
    """Score of the correct hypothesis, 0 when it is not in the list."""
    l2: float
    rank: int | None
    """1-based rank of the correct hypothesis, None when it is not in the list."""


def judge_list(scored: Sequence[tuple[bool, float]], rest_correct: bool) -> Sample:
    """Reduce listed ``(correct, score)`` hypotheses (in given order) to one sample.

    Scores summing above 1 are rescaled to sum to 1; otherwise the remainder becomes REST,
    appended last, and correct when ``rest_correct`` (the gold has no value).
    """
    total = math.fsum(score for _, score in scored)
    if total > 1.0:
        hyps = [(correct, score / total) for correct, score in scored]
        rest = 0.0
    else:
        hyps = list(scored)
        rest = 1.0 - total
    if rest > _REST_EPS:
        hyps.append((rest_correct, rest))
    # sorted() is stable, so ties keep list order and REST stays behind equal listed scores.
    ranked = sorted(hyps, key=lambda h: h[1], reverse=True)
    position = next((i for i, (correct, _) in enumerate(ranked) if correct), None)
    p = 0.0 if position is None else ranked[position][1]
    others = math.fsum(score * score for i, (_, score) in enumerate(ranked) if i != position)
    top_correct, top_score = ranked[0] if ranked else (False, 0.0)
    return Sample(top_correct, top_score, p, (1.0 - p) ** 2 + others,
                  None if position is None else position + 1)


def _present(state: State) -> State:
    """A hypothesised state without its ``none`` values, which mean "slot absent"."""
    return {s: v for s, v in state.items() if v != NONE}


def _joint_correct(policy: MatchPolicy, gold: State, hyp: State) -> bool:
    """A whole-state hypothesis is right when it has exactly the gold slots, each matching."""
    hyp = _present(hyp)
    return hyp.keys() == gold.keys() and all(
        policy.matches(slot, value, hyp[slot]) for slot, value in gold.items())


def _at(items: Sequence[T], t: int) -> T | None:
    """``items[t]``, or None past the end (a prediction file may list fewer turns)."""
    return items[t] if t < len(items) else None


def _slot_list(dialogue: HypDialogue, t: int, slot: str) -> list[tuple[str, float]]:
    lists = _at(dialogue.slot_hyps, t)
    return list(lists.get(slot) or []) if lists else []


def _joint_list(dialogue: HypDialogue, t: int) -> list[tuple[State, float]]:
    hyps = _at(dialogue.joint_hyps, t)
    return list(hyps) if hyps else []


def _slot_observable(dialogue: HypDialogue, gold_turn: State, t: int, slot: str) -> bool:
    """Whether turn ``t`` carries information about ``slot`` (gold change or a non-empty list)."""
    return slot in gold_turn or bool(_slot_list(dialogue, t, slot))


def _slot_observer(dialogue: HypDialogue, gold_turns: list[State],
                   slot: str) -> Callable[[int], bool]:
    return lambda t: _slot_observable(dialogue, gold_turns[t], t, slot)


def _joint_observable(dialogue: HypDialogue, gold_turn: State, t: int) -> bool:
    """Whether turn ``t`` carries information about any slot, or has a non-empty joint list."""
    lists = _at(dialogue.slot_hyps, t) or {}
    return (bool(gold_turn) or any(bool(h) for h in lists.values())
            or bool(_joint_list(dialogue, t)))


def _joint_observer(dialogue: HypDialogue, gold_turns: list[State]) -> Callable[[int], bool]:
    return lambda t: _joint_observable(dialogue, gold_turns[t], t)


def _turns(n_turns: int, schedule: int, observable: Callable[[int], bool]) -> range:
    """Turn indices that count under a schedule (1 all, 2 from first observable, 3 last)."""
    if schedule == 1:
        return range(n_turns)
    if schedule == 2:
        first = next((t for t in range(n_turns) if observable(t)), n_turns)
        return range(first, n_turns)
    if schedule == 3:
        return range(max(0, n_turns - 1), n_turns)
    raise ValueError(f"unknown DSTC schedule {schedule!r}; choose 1, 2 or 3")


def fa_key(point: float) -> str:
    """Key suffix of an FA operating point: ``0.05`` → ``"05"``, ``0.2`` → ``"20"``."""
    percent = Fraction(str(point)) * 100
    if percent.denominator == 1:
        return f"{int(percent):02d}"
    return str(float(percent)).replace(".", "p")


def metric_keys(fa_points: Sequence[float]) -> list[str]:
    """Every metric key of one component, in report order."""
    keys = list(_BASE_KEYS)
    for version in ("v1", "v2"):
        keys.append(f"roc_{version}_eer")
        keys += [f"roc_{version}_ca{fa_key(x)}" for x in fa_points]
    return keys


def _roc(samples: Sequence[Sample], version: int,
         fa_points: Sequence[float]) -> tuple[float | None, list[float | None]]:
    """EER and CA at each FA point, as percentages, for ROC version 1 or 2.

    Rates are compared exactly so that ties between thresholds are real ties, not float noise.
    The sweep starts with "accept nothing" (an infinite threshold), then lowers the threshold
    through the distinct top scores.
    """
    n = len(samples)
    n_correct = sum(s.top_correct for s in samples)
    n_incorrect = n - n_correct
    if version == 2 and (n_correct == 0 or n_incorrect == 0):
        return None, [None] * len(fa_points)
    # Counts accepted at each threshold: sorting once keeps the sweep O(n log n).
    ordered = sorted(samples, key=lambda s: s.top_score, reverse=True)
    sweep = [(0, 0)]  # (accepted correct, accepted incorrect), "accept nothing" first
    acc_correct = acc_incorrect = 0
    for i, sample in enumerate(ordered):
        acc_correct += sample.top_correct
        acc_incorrect += not sample.top_correct
        if i + 1 == n or ordered[i + 1].top_score != sample.top_score:
            sweep.append((acc_correct, acc_incorrect))
    # Rates as integer numerators over fixed denominators: exact, and fast on large sets.
    if version == 1:
        ca_den = fa_den = n
    else:
        ca_den, fa_den = n_correct, n_incorrect
    # (CA, FA, FR) numerators; FR shares CA's denominator (V1: all n; V2: FR = 1 - CA).
    points = [(acc_c, acc_i, n_correct - acc_c) for acc_c, acc_i in sweep]
    # min() returns the first of equal keys, i.e. the first threshold in the sweep.
    _, fa, fr = min(points, key=lambda pt: abs(pt[1] * ca_den - pt[2] * fa_den))
    eer = 100.0 * float((Fraction(fa, fa_den) + Fraction(fr, ca_den)) / 2)
    cas: list[float | None] = []
    for x in fa_points:
        limit = Fraction(str(x))  # the decimal the caller wrote, not its binary neighbour
        best = max((ca for ca, fa, _ in points
                    if fa * limit.denominator <= limit.numerator * fa_den), default=0)
        cas.append(100.0 * best / ca_den)
    return eer, cas


def component_metrics(samples: Sequence[Sample], fa_points: Sequence[float]) -> Metrics:
    """All metrics of one component (a slot or the joint state) over its pooled samples."""
    keys = metric_keys(fa_points)
    if not samples:
        return dict.fromkeys(keys)
    n = len(samples)
    out: Metrics = {
        "n": n,
        "accuracy": 100.0 * sum(s.top_correct for s in samples) / n,
        "l2": math.fsum(s.l2 for s in samples) / n,
        "avgp": 100.0 * math.fsum(s.p for s in samples) / n,
        "neglogp": math.fsum(-math.log(max(_MIN_P, s.p)) for s in samples) / n,
        "mrr": 100.0 * math.fsum(0.0 if s.rank is None else 1.0 / s.rank for s in samples) / n,
    }
    for version in (1, 2):
        eer, cas = _roc(samples, version, fa_points)
        out[f"roc_v{version}_eer"] = eer
        for x, ca in zip(fa_points, cas, strict=True):
            out[f"roc_v{version}_ca{fa_key(x)}"] = ca
    return out


def _mean_over_slots(per_slot: dict[str, Metrics], fa_points: Sequence[float]) -> Metrics:
    """Macro average over slots of each metric that is defined; ``n`` is the total count."""
    out: Metrics = {}
    for key in metric_keys(fa_points):
        values = [value for m in per_slot.values() if (value := m[key]) is not None]
        if key == "n":
            out[key] = sum(values) if values else None
        else:
            out[key] = math.fsum(values) / len(values) if values else None
    return out


def _slot_sample(policy: MatchPolicy, dialogue: HypDialogue, t: int, slot: str) -> Sample:
    gold = dialogue.gold[t]
    scored = [(slot in gold and policy.matches(slot, gold[slot], value), score)
              for value, score in _slot_list(dialogue, t, slot)]
    return judge_list(scored, rest_correct=slot not in gold)


def _joint_sample(policy: MatchPolicy, dialogue: HypDialogue, t: int) -> Sample:
    gold = dialogue.gold[t]
    scored = [(_joint_correct(policy, gold, state), score)
              for state, score in _joint_list(dialogue, t)]
    return judge_list(scored, rest_correct=not gold)


def _has_slot_lists(dialogue: HypDialogue, t: int) -> bool:
    """An empty ``{}`` counts as no lists: it names no slot the tracker considered."""
    return bool(_at(dialogue.slot_hyps, t))


def _has_joint_list(dialogue: HypDialogue, t: int) -> bool:
    return _at(dialogue.joint_hyps, t) is not None


def scored_hypothesis_metrics(
    dialogues: Sequence[HypDialogue],
    policy: MatchPolicy,
    slots: Sequence[str],
    *,
    schedules: Sequence[int] = (1, 2, 3),
    fa_points: Sequence[float] = (0.05, 0.10, 0.20),
) -> dict[str, Any] | None:
    """DSTC metrics per slot, their mean over slots, and for the joint state, per schedule.

    Returns None when the predictions carry no hypothesis lists at all, since every figure
    would then only measure the implicit REST hypothesis.
    """
    unknown = [s for s in schedules if s not in (1, 2, 3)]
    if unknown:
        raise ValueError(f"unknown DSTC schedule(s) {unknown}; choose from 1, 2, 3")
    any_slot = any(_has_slot_lists(d, t) for d in dialogues for t in range(len(d.gold)))
    any_joint = any(_has_joint_list(d, t) for d in dialogues for t in range(len(d.gold)))
    if not any_slot and not any_joint:
        return None

    # Judge each (component, dialogue, turn) once; schedules only choose among the samples.
    slot_samples = {slot: [[_slot_sample(policy, d, t, slot) for t in range(len(d.gold))]
                           for d in dialogues] for slot in slots}
    joint_samples = ([[_joint_sample(policy, d, t) for t in range(len(d.gold))]
                      for d in dialogues] if any_joint else None)

    gold_turns = [turn_states(d.gold) for d in dialogues]
    result: dict[str, Any] = {}
    for schedule in schedules:
        per_slot: dict[str, Metrics] = {}
        for slot in slots:
            chosen = [slot_samples[slot][i][t]
                      for i, d in enumerate(dialogues)
                      for t in _turns(len(d.gold), schedule,
                                      _slot_observer(d, gold_turns[i], slot))]
            per_slot[slot] = component_metrics(chosen, fa_points)
        joint = None
        if joint_samples is not None:
            chosen = [joint_samples[i][t]
                      for i, d in enumerate(dialogues)
                      for t in _turns(len(d.gold), schedule, _joint_observer(d, gold_turns[i]))]
            joint = component_metrics(chosen, fa_points)
        result[f"schedule{schedule}"] = {
            "slots": per_slot,
            "slot_mean": _mean_over_slots(per_slot, fa_points),
            "joint": joint,
        }
    notes = []
    if not any_joint:
        notes.append("no turn has a joint hypothesis list (pred_joint_hyps), so joint DSTC "
                     "metrics are not reported")
    if not any_slot:
        notes.append("no turn has a per-slot hypothesis list (pred_hyps); slot metrics only "
                     "score the implicit REST hypothesis")
    result["notes"] = notes
    return result
