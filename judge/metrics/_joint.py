"""Turn-pooled state metrics: JGA, slot accuracy, AGA, RSA, slot P/R/F1, turn update accuracy.

All functions take dialogues already prepared by a matching policy (equality means match) and
return percentages, or None when the metric is undefined on the input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from ..data import State, turn_state
from ._types import Prepared, f1, ratio


def joint_goal_accuracy(dialogues: Sequence[Prepared]) -> float | None:
    hits = turns = 0
    for d in dialogues:
        for g, p in zip(d.gold, d.pred, strict=True):
            turns += 1
            hits += g == p
    return ratio(hits, turns)


def final_turn_jga(dialogues: Sequence[Prepared]) -> float | None:
    """JGA on each dialogue's last turn only (SOM-DST's "final joint accuracy")."""
    finals = [d.gold[-1] == d.pred[-1] for d in dialogues if d.gold]
    return ratio(sum(finals), len(finals))


def _mismatches(g: State, p: State) -> int:
    wrong = sum(1 for s, v in g.items() if p.get(s) != v)
    return wrong + sum(1 for s in p if s not in g)


def slot_accuracy(dialogues: Sequence[Prepared], num_slots: int) -> float | None:
    total = 0.0
    turns = 0
    for d in dialogues:
        for g, p in zip(d.gold, d.pred, strict=True):
            turns += 1
            total += (num_slots - _mismatches(g, p)) / num_slots
    return ratio(total, turns)


def average_goal_accuracy(
    dialogues: Sequence[Prepared],
    unit: Literal["turn", "frame"] = "turn",
    domain_of: Callable[[str], str] | None = None,
) -> float | None:
    total = 0.0
    units = 0
    for d in dialogues:
        for g, p in zip(d.gold, d.pred, strict=True):
            if not g:
                continue
            if unit == "turn":
                units += 1
                total += sum(1 for s, v in g.items() if p.get(s) == v) / len(g)
                continue
            assert domain_of is not None
            frames: dict[str, list[int]] = {}
            for s, v in g.items():
                counts = frames.setdefault(domain_of(s), [0, 0])
                counts[0] += p.get(s) == v
                counts[1] += 1
            for hit, size in frames.values():
                units += 1
                total += hit / size
    return ratio(total, units)


def relative_slot_accuracy(
    dialogues: Sequence[Prepared], empty_turn: Literal["zero", "skip", "one"] = "zero"
) -> float | None:
    total = 0.0
    turns = 0
    for d in dialogues:
        for g, p in zip(d.gold, d.pred, strict=True):
            if not g and not p:
                if empty_turn == "skip":
                    continue
                turns += 1
                total += 1.0 if empty_turn == "one" else 0.0
                continue
            union = g.keys() | p.keys()
            turns += 1
            total += sum(1 for s in union if g.get(s) == p.get(s)) / len(union)
    return ratio(total, turns)


def slot_prf(dialogues: Sequence[Prepared]) -> dict[str, float | None]:
    """Precision, recall and F1 over (slot, value) pairs, pooled over turns."""
    tp = n_pred = n_gold = 0
    for d in dialogues:
        for g, p in zip(d.gold, d.pred, strict=True):
            n_gold += len(g)
            n_pred += len(p)
            tp += sum(1 for s, v in p.items() if g.get(s) == v)
    precision = ratio(tp, n_pred)
    recall = ratio(tp, n_gold)
    return {"precision": precision, "recall": recall, "f1": f1(precision, recall)}


def turn_update_accuracy(dialogues: Sequence[Prepared], *,
                         include_removals: bool = False) -> float | None:
    """Share of turns whose gold update (new or changed pairs) equals the predicted update."""
    hits = turns = 0
    for d in dialogues:
        prev_g: State = {}
        prev_p: State = {}
        for g, p in zip(d.gold, d.pred, strict=True):
            turns += 1
            hits += (turn_state(prev_g, g, include_removals=include_removals)
                     == turn_state(prev_p, p, include_removals=include_removals))
            prev_g, prev_p = g, p
    return ratio(hits, turns)
