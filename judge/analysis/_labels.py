"""Human labels: one person's verdict on one predicted turn state, and optionally on its slots.

The labels file is JSON Lines, one record per (reviewer, turn); its JSON Schema is
``judge/data/formats/labels.schema.json`` and every writer (``labels import``, the web
interface) produces that format. It grew from the first version, whose files still read:

* ``label`` 1 = the predicted turn state is correct, 0 = incorrect; ``null`` only together
  with ``unsure: true``. Unsure labels are kept and counted but never enter a statistic:
  forcing a doubt into a class would bias agreement either way.
* ``reviewer`` names the person (``annotator`` is the older spelling, still accepted);
  ``time`` (ISO 8601) says when, ``note`` why.
* ``slots`` holds per-slot labels: ``{slot: {"label": 1|0|null, "unsure", "value",
  "expected", "note"}}``, where 1 = this slot of the prediction is right (set right, or
  rightly absent) and 0 = wrong or missing.

Strict types and no extra fields: ``"label": true`` or a misspelt ``"reviwer"`` is more likely
a mistake than an intent, so it is rejected, not guessed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from .._errors import InputError
from .._io import iter_jsonl_lines, open_output, parse_line
from ..data import dialogue_key

TurnKey = tuple[str, int]
"""A turn as ``(dialogue_key(dialogue_id), turn_index)``, so id spellings do not matter."""

SlotKey = tuple[str, int, str]
"""A slot of a turn: ``(dialogue key, turn index, slot name)``."""

UNNAMED = "(unnamed)"
"""How labels without a reviewer are shown: together they are one reviewer."""


def _zero_or_one(value: int | None) -> int | None:
    if value is not None and value not in (0, 1):
        raise ValueError("label must be 0 (incorrect) or 1 (correct)")
    return value


def _iso_time(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("time must be an ISO 8601 date and time, e.g. "
                         "2025-03-01T14:05:00Z") from None
    return value


Label = Annotated[StrictInt | None, AfterValidator(_zero_or_one)]


class SlotLabel(BaseModel):
    """A reviewer's verdict on one slot of a predicted turn state."""

    model_config = ConfigDict(strict=True, extra="forbid")

    label: Label
    unsure: StrictBool = False
    value: str | None = None
    """The predicted value the reviewer saw (null: the prediction did not set the slot)."""
    expected: str | None = None
    """The value the reviewer would annotate, when they say."""
    note: str | None = None

    @property
    def definite(self) -> int | None:
        """The label when it counts (given and not unsure), else None."""
        return None if self.unsure else self.label


class HumanLabel(BaseModel):
    """One person's verdict on one predicted turn state (one line of a labels file)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    dialogue_id: str = Field(min_length=1)
    turn_index: int = Field(ge=0)
    label: Label
    unsure: StrictBool = False
    reviewer: str | None = Field(default=None, min_length=1)
    annotator: str | None = Field(default=None, min_length=1)
    time: Annotated[str, AfterValidator(_iso_time)] | None = None
    note: str | None = None
    slots: dict[Annotated[str, Field(min_length=1)], SlotLabel] | None = None
    predictions_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """The predictions file whose turn state was labelled (the service's exports say so)."""

    @property
    def key(self) -> TurnKey:
        return (dialogue_key(self.dialogue_id), self.turn_index)

    @property
    def person(self) -> str | None:
        """The reviewer, whichever spelling the record used."""
        return self.reviewer if self.reviewer is not None else self.annotator

    @property
    def annotator_name(self) -> str:
        person = self.person
        return person if person is not None else UNNAMED

    @property
    def definite(self) -> int | None:
        """The turn label when it counts (given and not unsure), else None."""
        return None if self.unsure else self.label


def _record_problem(record: HumanLabel) -> tuple[str, str] | None:
    """A contradiction inside one record, as (message, field), or None."""
    if record.label is None and not record.unsure:
        return "label may be null only with \"unsure\": true", "label"
    if (record.reviewer is not None and record.annotator is not None
            and record.reviewer != record.annotator):
        return (f"reviewer {record.reviewer!r} and annotator {record.annotator!r} differ "
                "(they are two spellings of one field)", "reviewer")
    for slot, verdict in (record.slots or {}).items():
        if verdict.label is None and not verdict.unsure:
            return "label may be null only with \"unsure\": true", f"slots.{slot}.label"
        if record.definite == 1 and verdict.definite == 0:
            return ("the turn is labelled correct (1) but this slot incorrect (0)",
                    f"slots.{slot}.label")
    return None


@dataclass
class HumanLabels:
    """The labels of one file, checked so that no reviewer labels one turn twice."""

    records: list[HumanLabel]
    path: str | None = None
    lines: list[int] | None = field(default=None, repr=False)
    """1-based line of each record, when the labels were read from a file."""

    def __post_init__(self) -> None:
        if self.lines is not None and len(self.lines) != len(self.records):
            raise ValueError("lines must give one line number per record")
        seen: dict[tuple[str | None, TurnKey], int] = {}
        for index, record in enumerate(self.records):
            problem = _record_problem(record)
            if problem is not None:
                raise InputError(problem[0], path=self.path, line=self.line_of(index),
                                 field=problem[1])
            slot = (record.person, record.key)
            if slot in seen:
                first = seen[slot]
                where = f"line {self.lines[first]}" if self.lines else f"record {first + 1}"
                name = "reviewer" if record.reviewer is not None else "annotator"
                who = (f"{name} {record.person!r}" if record.person is not None
                       else "a label without annotator (name the reviewers to give one turn "
                            "several labels)")
                raise InputError(
                    f"{who} already labelled dialogue {record.dialogue_id!r} turn "
                    f"{record.turn_index} ({where})",
                    path=self.path, line=self.line_of(index), field=name)
            seen[slot] = index

    def line_of(self, index: int) -> int | None:
        """The file line of record ``index``, for messages that point the user at it."""
        return self.lines[index] if self.lines else None

    @property
    def annotators(self) -> tuple[str, ...]:
        """Reviewer names in order of first appearance (unnamed ones as ``UNNAMED``)."""
        return tuple(dict.fromkeys(r.annotator_name for r in self.records))

    @property
    def unsure_turns(self) -> int:
        """Turn labels marked unsure (kept, but left out of every statistic)."""
        return sum(r.unsure for r in self.records)

    def by_annotator(self) -> dict[str, dict[TurnKey, int]]:
        """Each reviewer's definite labels by turn (a reviewer labels a turn at most once)."""
        out: dict[str, dict[TurnKey, int]] = {name: {} for name in self.annotators}
        for record in self.records:
            if record.definite is not None:
                out[record.annotator_name][record.key] = record.definite
        return out

    def _votes(self) -> dict[TurnKey, Counter[int]]:
        votes: dict[TurnKey, Counter[int]] = {}
        for record in self.records:
            if record.definite is not None:
                votes.setdefault(record.key, Counter())[record.definite] += 1
        return votes

    def per_turn(self) -> dict[TurnKey, int]:
        """The majority label of every turn; tied turns are left out (see ``tied_turns``)."""
        return {key: int(votes[1] > votes[0]) for key, votes in self._votes().items()
                if votes[1] != votes[0]}

    def tied_turns(self) -> list[TurnKey]:
        """Turns whose reviewers split evenly, so they have no majority label."""
        return [key for key, votes in self._votes().items() if votes[1] == votes[0]]

    def per_slot(self) -> dict[SlotKey, int]:
        """The majority of the definite per-slot labels; ties are left out."""
        votes: dict[SlotKey, Counter[int]] = {}
        for record in self.records:
            for slot, verdict in (record.slots or {}).items():
                if verdict.definite is not None:
                    votes.setdefault((*record.key, slot), Counter())[verdict.definite] += 1
        return {key: int(v[1] > v[0]) for key, v in votes.items() if v[1] != v[0]}

    def _unknown_indices(self, rows: Iterable[Mapping[str, Any]]) -> list[int]:
        known = {row_key(row) for row in rows}
        return [i for i, record in enumerate(self.records) if record.key not in known]

    def unknown_turns(self, rows: Iterable[Mapping[str, Any]]) -> list[HumanLabel]:
        """Labels naming a turn the run does not hold; reported, because a labels file made
        for a larger (or different) run is a common and harmless mismatch."""
        return [self.records[i] for i in self._unknown_indices(rows)]


def row_key(row: Mapping[str, Any]) -> TurnKey:
    """The turn key of a judgment row (or any record with dialogue_id and turn_index)."""
    return (dialogue_key(str(row["dialogue_id"])), int(row["turn_index"]))


def load_labels(path: str | Path) -> HumanLabels:
    """Read and validate a human labels file (JSON Lines, plain or gzipped).

    Raises :class:`InputError` naming file, line and field at the first problem.
    """
    records: list[HumanLabel] = []
    lines: list[int] = []
    for line, text in iter_jsonl_lines(path):
        records.append(parse_line(HumanLabel, text, path=path, line=line))
        lines.append(line)
    if not records:
        raise InputError("no labels in file", path=path)
    return HumanLabels(records, path=str(path), lines=lines)


def write_labels(records: Iterable[Mapping[str, Any] | HumanLabel], path: str | Path) -> int:
    """Write human-label records as JSON Lines; returns how many were written.

    Records may be plain mappings or :class:`HumanLabel` objects (fields left at their
    defaults are not written, so old readers see the old format).
    """
    count = 0
    with open_output(path) as handle:
        for record in records:
            if isinstance(record, HumanLabel):
                record = record.model_dump(exclude_defaults=True)
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
