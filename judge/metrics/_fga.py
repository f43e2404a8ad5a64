"""Flexible Goal Accuracy (Dey et al., 2022) and TurnMatch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..data import State, turn_state
from ._types import Prepared, ratio

_EXACT = -1  # marker: the turn's state is exactly right
_ERROR = 0  # marker: a type-1 error (the turn itself is wrong)


def fga_turn_marks(gold: Sequence[State], pred: Sequence[State]) -> list[int]:
    """Per turn: ``-1`` exact match, ``0`` type-1 error, ``k > 0`` turn-level match ``k`` turns
    after the last type-1 error (a carried-over, type-2 error)."""
    marks: list[int] = []
    last_error = 0
    prev_g: State = {}
    prev_p: State = {}
    for t, (g, p) in enumerate(zip(gold, pred, strict=True)):
        if g == p:
            marks.append(_EXACT)
        elif t == 0 or prev_g == prev_p:
            marks.append(_ERROR)
            last_error = t
        else:
            delta_g = turn_state(prev_g, g)
            delta_p = turn_state(prev_p, p)
            if (any(p.get(s) != v for s, v in delta_g.items())
                    or any(g.get(s) != v for s, v in delta_p.items())):
                marks.append(_ERROR)
                last_error = t
            else:
                marks.append(t - last_error)
        prev_g, prev_p = g, p
    return marks


def lambda_key(lam: float) -> str:
    """JSON key of an FGA lambda: ``0.5`` → ``"0.5"``, ``1`` → ``"1.0"``."""
    return str(float(lam))


def flexible_goal_accuracy(
    dialogues: Sequence[Prepared], lambdas: Sequence[float]
) -> tuple[dict[str, float | None], float | None]:
    """FGA for each lambda, and TurnMatch (the share of turns with a non-zero FGA score)."""
    sums = [0.0] * len(lambdas)
    matched = turns = 0
    for d in dialogues:
        for mark in fga_turn_marks(d.gold, d.pred):
            turns += 1
            if mark == _ERROR:
                continue
            matched += 1
            for i, lam in enumerate(lambdas):
                sums[i] += 1.0 if mark == _EXACT else 1.0 - math.exp(-lam * mark)
    scores = {lambda_key(lam): ratio(total, turns)
              for lam, total in zip(lambdas, sums, strict=True)}
    return scores, ratio(matched, turns)
