"""Cumulative dialogue states ↔ turn states (per-turn changes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

State = dict[str, str]
"""A dialogue state: slot name → value. Only filled slots; ``none`` means absent."""

NONE = "none"


def _shares_alternative(old: str, new: str, separator: str) -> bool:
    return not set(old.split(separator)).isdisjoint(new.split(separator))


def turn_state(
    previous: State,
    current: State,
    *,
    include_removals: bool = False,
    separator: str | None = None,
) -> State:
    """Pairs of ``current`` that are new or changed since ``previous``.

    With ``include_removals`` a slot that disappeared is listed with value ``none`` (an explicit
    deletion). With ``separator`` (e.g. ``|``), a value counts as unchanged when the old and new
    alternative lists share a value, as SGD's equivalent surface forms require.
    """
    update: State = {}
    for slot, value in current.items():
        old = previous.get(slot)
        if old == value:
            continue
        if old is not None and separator and _shares_alternative(old, value, separator):
            continue
        update[slot] = value
    if include_removals:
        for slot in previous:
            if slot not in current:
                update[slot] = NONE
    return update


def turn_states(
    states: Sequence[State], *, include_removals: bool = False, separator: str | None = None
) -> list[State]:
    """Turn states of a whole dialogue from its cumulative states."""
    previous: State = {}
    out = []
    for state in states:
        out.append(turn_state(previous, state, include_removals=include_removals,
                              separator=separator))
        previous = state
    return out


def judged_turn_states(pred_states: Sequence[State], given: Sequence[State | None]) -> list[State]:
    """What is judged per turn: the model's own turn output where given, else the change
    between consecutive predicted states (METHOD.md §1)."""
    return [own if own is not None else derived
            for own, derived in zip(given, turn_states(pred_states), strict=True)]


STORED_DELETIONS: tuple[str | None, ...] = (NONE, "", None)
"""Deletions as stored rows of a run may hold them: ``none``, and an empty or null value
(a page showing a run's rows integrates them with these)."""


def apply_turn_state(previous: State, update: State, *,
                     none_values: Iterable[str | None] = (NONE,)) -> State:
    """The cumulative state after applying a turn state: set each slot, delete on a value of
    ``none_values`` (``none``; :data:`STORED_DELETIONS` adds empty and null values)."""
    nones = set(none_values)
    state = dict(previous)
    for slot, value in update.items():
        if value in nones:
            state.pop(slot, None)
        else:
            state[slot] = value
    return state


def cumulative_states(updates: Sequence[State | None], *,
                      none_values: Iterable[str | None] = (NONE,)) -> list[State]:
    """Cumulative states of a dialogue from its turn states (inverse of :func:`turn_states`);
    a missing turn state (None) changes nothing."""
    nones = tuple(none_values)
    state: State = {}
    out = []
    for update in updates:
        state = apply_turn_state(state, update or {}, none_values=nones)
        out.append(state)
    return out
