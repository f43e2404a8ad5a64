"""Small shared types of the metric modules."""

from __future__ import annotations

from dataclasses import dataclass

from ..data import Hypotheses, State


@dataclass(slots=True)
class Prepared:
    """One dialogue's gold and predicted cumulative states after the matching policy."""

    dialogue_id: str
    gold: list[State]
    pred: list[State]


def ratio(numerator: float, denominator: float) -> float | None:
    """``100 * numerator / denominator``, or None when undefined."""
    return None if denominator == 0 else 100.0 * numerator / denominator


def f1(precision: float | None, recall: float | None) -> float | None:
    """Harmonic mean of two percentages; None when either is undefined, 0 when both are 0."""
    if precision is None or recall is None:
        return None
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


@dataclass(slots=True)
class HypDialogue:
    """One dialogue's gold states and a tracker's scored N-best lists (for DSTC metrics)."""

    dialogue_id: str
    gold: list[State]
    """Raw gold cumulative states (``none`` values already dropped, alternatives unresolved)."""
    slot_hyps: list[dict[str, Hypotheses] | None]
    """Per turn: slot → [(value, score), ...], or None when the turn has no lists."""
    joint_hyps: list[list[tuple[State, float]] | None]
    """Per turn: [(whole state, score), ...], or None."""
