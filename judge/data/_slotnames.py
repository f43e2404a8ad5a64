"""Predicted slot names the schema does not have, each with the closest name it does have.

A typo such as ``hotel-pricerang`` is not an error in a predictions file (the file is valid,
and the slot simply counts as a wrong prediction), but a user who made it wants to hear about it
before paying for a run. Every reader of predictions (``validate``, ``evaluate``, the service's
upload and ``submit``) reports the names through :func:`out_of_schema_slots` and words them with
:func:`describe_out_of_schema`, so they all say the same thing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz import fuzz, process

from .._io import iter_jsonl_lines, plural
from ._schema import Schema

SUGGESTION_CUTOFF = 60.0
"""Least similarity (rapidfuzz ratio, 0-100) for a schema slot to be offered as the likely
meant one; below it no suggestion is better than a random one."""


@dataclass(frozen=True)
class OutOfSchemaSlot:
    """One predicted slot name outside the schema."""

    name: str
    turns: int
    """Turns whose predicted state or turn state holds the name."""
    suggestion: str | None
    """The most similar schema slot name, or None when nothing is close."""

    def as_dict(self) -> dict[str, object]:
        return {"slot": self.name, "turns": self.turns, "suggestion": self.suggestion}


def closest_slot(name: str, schema: Schema) -> str | None:
    """The schema slot name most similar to ``name`` (case-blind), if any is close enough."""
    choices = {slot: slot.lower() for slot in schema.slot_names}
    found = process.extractOne(name.lower(), choices, scorer=fuzz.ratio,
                               score_cutoff=SUGGESTION_CUTOFF)
    return found[2] if found else None


def out_of_schema_slots(counts: Mapping[str, int], schema: Schema) -> list[OutOfSchemaSlot]:
    """``counts`` (slot name → turns) restricted to names outside ``schema``, most frequent
    first, each with its suggestion. A name the loaders rename to a schema slot (another
    spelling, an alias: :meth:`Schema.resolve_slot`) is inside it."""
    items = [(name, n) for name, n in counts.items() if schema.resolve_slot(name) is None]
    items.sort(key=lambda item: (-item[1], item[0]))
    return [OutOfSchemaSlot(name, n, closest_slot(name, schema)) for name, n in items]


def describe_out_of_schema(slots: Iterable[OutOfSchemaSlot], *, shown: int = 5) -> str | None:
    """One sentence naming the slots, their turn counts and suggestions; None for none."""
    slots = list(slots)
    if not slots:
        return None
    parts = []
    for slot in slots[:shown]:
        hint = f"; closest schema slot: {slot.suggestion}" if slot.suggestion else ""
        parts.append(f"{slot.name} ({plural(slot.turns, 'turn')}{hint})")
    more = f", and {len(slots) - shown} more" if len(slots) > shown else ""
    names = "name" if len(slots) == 1 else "names"
    return (f"{len(slots)} predicted slot {names} outside the schema: {', '.join(parts)}{more}. "
            "Such slots count as wrong predictions.")


def predicted_slot_names(path: str | Path) -> Counter[str]:
    """Slot name → number of turns whose ``pred_state`` or ``pred_turn_state`` holds it, read
    straight from a native predictions file (JSON Lines) that has already been validated. A
    turn without ``pred_state`` (a file of turn states only) holds what the turns before it
    held as well, as the loader integrates it. Records or turns of another shape are skipped:
    validation reports those."""
    counts: Counter[str] = Counter()
    for _, text in iter_jsonl_lines(path):
        try:
            record = json.loads(text)
        except ValueError:
            continue
        turns = record.get("turns") if isinstance(record, dict) else None
        held: set[str] = set()
        for turn in turns if isinstance(turns, list) else ():
            if not isinstance(turn, dict):
                continue
            state, update = turn.get("pred_state"), turn.get("pred_turn_state")
            names = {str(n) for n in state} if isinstance(state, dict) else set(held)
            if isinstance(update, dict):
                names.update(str(n) for n in update)
            counts.update(names)
            held = names
    return counts
