"""Granular Change Accuracy (Aksu & Chen): correct, wrong, over- and missed changes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from ._types import Prepared


@dataclass
class ChangeCounts:
    """GCA's four counts, pooled over dialogues."""

    C: int = 0
    W: int = 0
    O: int = 0  # noqa: E741 - the paper's name
    M: int = 0

    def add(self, other: ChangeCounts) -> None:
        self.C += other.C
        self.W += other.W
        self.O += other.O
        self.M += other.M


def count_changes(gold: Sequence[dict[str, str]], pred: Sequence[dict[str, str]], *,
                  dedupe: bool = False, none: str = "none") -> ChangeCounts:
    """Run GCA's two loops over one dialogue (METRICS.md, GCA)."""
    counts = ChangeCounts()
    for turn in turn_changes(gold, pred, dedupe=dedupe, none=none):
        counts.add(turn)
    return counts


def turn_changes(gold: Sequence[dict[str, str]], pred: Sequence[dict[str, str]], *,
                 dedupe: bool = False, none: str = "none") -> Iterator[ChangeCounts]:
    """GCA's counts turn by turn (their sum is :func:`count_changes`): a leaderboard needs
    each turn's part to cluster and to break down by turn position."""
    prev_g: dict[str, str] = {}
    prev_p: dict[str, str] = {}
    seen_g: set[str] = set()
    seen_p: set[str] = set()
    for gold_state, pred_state in zip(gold, pred, strict=True):
        counts = ChangeCounts()
        seen_g.update(gold_state)
        seen_p.update(pred_state)
        g = dict(gold_state)
        for slot in seen_g.difference(gold_state):
            g[slot] = none
        p = dict(pred_state)
        for slot in seen_p.difference(pred_state):
            p[slot] = none
        correct: set[str] = set()
        wrong: set[str] = set()
        for slot, value in g.items():
            if prev_g.get(slot) == value:
                continue
            if slot not in p:
                if value != none:
                    counts.M += 1
                else:
                    counts.C += 1
            elif p[slot] == value:
                counts.C += 1
                correct.add(slot)
            elif value == none:
                counts.O += 1
            else:
                counts.W += 1
                wrong.add(slot)
        for slot, value in p.items():
            if prev_p.get(slot) == value:
                continue
            if dedupe and (slot in correct or slot in wrong):
                continue
            if slot not in g:
                if value != none:
                    counts.O += 1
                else:
                    counts.C += 1
            elif value == g[slot] and slot not in correct:
                counts.C += 1
            elif value == none:
                counts.M += 1
            elif value != g[slot] and slot not in wrong:
                counts.W += 1
        prev_g, prev_p = g, p
        yield counts


def gca_score(counts: ChangeCounts, *, alpha: float = 10 / 11,
              undefined: Literal["zero", "null"] = "zero") -> dict[str, object]:
    """GCA and its four parts (×100) from pooled counts."""
    c, w, o, m = counts.C, counts.W, counts.O, counts.M
    n_pred, n_gold = c + w + o, c + w + m

    def part(numerator: int, denominator: int) -> float | None:
        if denominator == 0:
            return None if undefined == "null" else 0.0
        return numerator / denominator

    vp, vr = part(c, n_pred), part(c, n_gold)
    lp, lr = part(c + w, n_pred), part(c + w, n_gold)
    gca: float | None
    if vp is None or vr is None or lp is None or lr is None:
        gca = None
    elif 0 in (vp, vr, lp, lr):
        gca = 0.0
    else:
        weighted = [(alpha * n_pred, vp), (alpha * n_gold, vr),
                    ((1 - alpha) * n_pred, lp), ((1 - alpha) * n_gold, lr)]
        gca = sum(wt for wt, _ in weighted) / sum(wt / x for wt, x in weighted if wt)

    def pct(x: float | None) -> float | None:
        return None if x is None else 100.0 * x

    return {"gca": pct(gca), "vp": pct(vp), "vr": pct(vr), "lp": pct(lp), "lr": pct(lr),
            "counts": {"C": c, "W": w, "O": o, "M": m}}


def granular_change_accuracy(dialogues: Sequence[Prepared], *, alpha: float = 10 / 11,
                             dedupe: bool = False,
                             undefined: Literal["zero", "null"] = "zero",
                             none: str = "none") -> dict[str, object]:
    total = ChangeCounts()
    for d in dialogues:
        total.add(count_changes(d.gold, d.pred, dedupe=dedupe, none=none))
    return gca_score(total, alpha=alpha, undefined=undefined)
