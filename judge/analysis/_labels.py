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
* ``predictions_sha256`` names the predictions file whose turn states were labelled (every
  writer of dst-judge writes it when it is known): labels naming other predictions than a
  run's are refused, and labels naming none are not tied to the run (:func:`labels_tie`).
* ``blind`` says whether the reviewer labelled with the judge's and the rules' verdicts and
  the gold hidden (the web's sample queue does so by default).

Strict types and no extra fields: ``"label": true`` or a misspelt ``"reviwer"`` is more likely
a mistake than an intent, so it is rejected, not guessed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from .._errors import DataMismatchError, InputError
from .._io import MAX_NAME_CHARS, iter_jsonl_lines, open_output, parse_line
from ..data import dialogue_key
from .reports import LabelsTie

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
    reviewer: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    annotator: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    time: Annotated[str, AfterValidator(_iso_time)] | None = None
    note: str | None = None
    slots: dict[Annotated[str, Field(min_length=1)], SlotLabel] | None = None
    predictions_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """The predictions file whose turn state was labelled (the service's exports say so)."""
    blind: StrictBool | None = None
    """Given without the judge's and the rules' verdicts and the gold in view (None: not
    recorded)."""

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

    def unsure_only_turns(self) -> list[TurnKey]:
        """Turns whose every label is unsure: reviewed, but with no definite label."""
        definite = set(self._votes())
        return list(dict.fromkeys(r.key for r in self.records
                                  if r.unsure and r.key not in definite))

    def resolve(self, adjudicator: str | None = None) -> Resolution:
        """Every turn's label and how it was reached: ``majority`` of the definite labels
        (one reviewer's label is a majority of one), ``adjudicated`` (the ``adjudicator``'s
        definite label decides a turn the others split on; an adjudicator's label on a turn
        the others agree on is one more vote), or none: ``tied`` (reviewers split evenly)
        and ``unsure`` (every label unsure) turns are left out of the labels, and named."""
        if adjudicator is not None and adjudicator not in self.annotators:
            raise DataMismatchError(f"no labels by adjudicator {adjudicator!r} (reviewers: "
                                    f"{', '.join(self.annotators)})", path=self.path,
                                    field="reviewer")
        votes: dict[TurnKey, Counter[int]] = {}
        ruling: dict[TurnKey, int] = {}
        for record in self.records:
            if record.definite is None:
                continue
            if adjudicator is not None and record.annotator_name == adjudicator:
                ruling[record.key] = record.definite
            votes.setdefault(record.key, Counter())[record.definite] += 1
        out = Resolution()
        for key, counted in votes.items():
            others = counted.copy()
            if key in ruling:
                others[ruling[key]] -= 1
            if key in ruling and others[1] == others[0] and others[1] > 0:
                out.labels[key] = ruling[key]
                out.how[key] = "adjudicated"
            elif counted[1] != counted[0]:
                out.labels[key] = int(counted[1] > counted[0])
                out.how[key] = "majority"
            else:
                out.tied.append(key)
        out.unsure = self.unsure_only_turns()
        return out

    def check_predictions(self, digest: str | None, *, run: str) -> None:
        """Refuse labels of other predictions: every label that names the predictions file it
        judged (``predictions_sha256``) must name ``digest``, the one ``run`` judged (nothing
        to check when the run's predictions are unknown)."""
        if digest is None:
            return
        for index, record in enumerate(self.records):
            named = record.predictions_sha256
            if named is not None and named != digest:
                raise DataMismatchError(
                    f"this label judges predictions {named[:12]}…, but {run} judged "
                    f"predictions {digest[:12]}…: these labels belong to another run's "
                    "predictions", path=self.path, line=self.line_of(index),
                    field="predictions_sha256")

    def predictions(self) -> list[str]:
        """The predictions digests the labels name, in order of first appearance."""
        return list(dict.fromkeys(r.predictions_sha256 for r in self.records
                                  if r.predictions_sha256 is not None))

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


@dataclass
class Resolution:
    """Turn labels after resolving reviewers (:meth:`HumanLabels.resolve`)."""

    labels: dict[TurnKey, int] = field(default_factory=dict)
    how: dict[TurnKey, str] = field(default_factory=dict)
    """``majority`` or ``adjudicated`` per labelled turn."""
    tied: list[TurnKey] = field(default_factory=list)
    unsure: list[TurnKey] = field(default_factory=list)

    def undecided(self) -> dict[TurnKey, str]:
        """Reviewed turns without a label: ``tied`` or ``unsure``."""
        return {**dict.fromkeys(self.unsure, "unsure"), **dict.fromkeys(self.tied, "tied")}


def pair_by_predictions(files: Sequence[HumanLabels], digests: Sequence[str | None],
                        names: Sequence[str]) -> tuple[list[HumanLabels], str | None]:
    """One labels file per run, paired by the predictions they judged: each file that names
    its predictions (``predictions_sha256``) goes to the run that judged them, whatever the
    order given; a file naming predictions no run judged is refused. When a file or a run
    does not say (labels written by hand, a run copied without its manifest) the files pair
    by order, with a warning, and every digest that is known must still match."""
    if len(files) != len(digests):
        raise DataMismatchError(f"{len(files)} labels file(s) for {len(digests)} runs: give one "
                                "per run (the labels of that run's predictions)")
    named: list[str | None] = []
    for labels in files:
        found = labels.predictions()
        if len(found) > 1:
            index = next(i for i, r in enumerate(labels.records)
                         if r.predictions_sha256 == found[1])
            raise DataMismatchError(
                f"this file holds labels of two predictions files ({found[0][:12]}… first, "
                f"then {found[1][:12]}…): give one labels file per run", path=labels.path,
                line=labels.line_of(index), field="predictions_sha256")
        named.append(found[0] if found else None)
    known = [d for d in named if d]
    if len(known) == len(named) and all(digests):
        paired: list[HumanLabels | None] = [None] * len(digests)
        for labels, judged in zip(files, known, strict=True):
            free = [i for i, d in enumerate(digests) if d == judged and paired[i] is None]
            if not free:
                runs = "; ".join(f"{n}: {d[:12]}…" for n, d in zip(names, digests, strict=True)
                                 if d is not None)
                raise DataMismatchError(
                    f"these labels judge predictions {judged[:12]}…, which no run given "
                    f"judged ({runs})", path=labels.path, line=labels.line_of(0),
                    field="predictions_sha256")
            paired[free[0]] = labels
        return [p for p in paired if p is not None], None
    for labels, digest, name in zip(files, digests, names, strict=True):
        labels.check_predictions(digest, run=name)
    silent = [str(labels.path) for labels, d in zip(files, named, strict=True) if d is None]
    unknown = [name for name, d in zip(names, digests, strict=True) if d is None]
    why = (f"{', '.join(silent)} name{'s' if len(silent) == 1 else ''} no predictions_sha256"
           if silent else f"the predictions of {', '.join(unknown)} are not known")
    return list(files), (f"labels files are paired with runs by the order given ({why}): "
                         "check that the n-th labels file labels the n-th run's predictions")


NOT_TIED = "labels not tied to this run"
"""How figures resting on labels without their run's predictions digest are marked."""


def labels_tie(labels: HumanLabels, digest: str | None, *, run: str) -> LabelsTie:
    """Whether ``labels`` are tied to the predictions ``run`` judged (``digest``): every label
    names them (``predictions_sha256``; a label naming others is refused by
    :meth:`HumanLabels.check_predictions`, called first). When a label names none, or the
    run's predictions are not known, nothing shows that the labels judged this run's
    predictions: labels written for another system's run would be taken for this one.
    ``tied`` false then comes with the ``warning`` that says so, and the figures resting
    on the labels are marked (:data:`NOT_TIED`)."""
    unnamed = sum(r.predictions_sha256 is None for r in labels.records)
    block: LabelsTie = {"tied": not unnamed and digest is not None,
                             "labels": len(labels.records), "unnamed_labels": unnamed,
                             "predictions_sha256": digest, "warning": None}
    if block["tied"]:
        return block
    where = labels.path or "the labels"
    why = (f"{unnamed} of {len(labels.records)} labels in {where} name no predictions_sha256"
           if unnamed else f"the predictions {run} judged are not known (its manifest "
           "records no predictions_sha256)")
    block["warning"] = (
        f"{why}, so nothing ties them to {run}: labels written for another system's "
        "predictions would be taken for this run's without a word. Every figure resting on "
        f"them (human agreement, estimates) is marked \"{NOT_TIED}\". Labels written by "
        "dst-judge carry the digest ('labels import --run', the web's export, GET "
        "/v1/labels?format=labels)")
    return block


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
