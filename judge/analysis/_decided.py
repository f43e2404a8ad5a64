"""A reviewed candidates file (``audit --candidates`` with its ``decision``/``value`` columns
filled in) as a corrections file: review without a judge run, a server or a hand-typed
JSON line.

Each row's ``decision`` says what the reviewer found: ``accept`` (the suggested value is
right), ``reject`` (the annotation is right), ``edit`` (the right value is in ``value``; empty:
the slot holds none), or blank (not reviewed yet, skipped). A ``value`` typed with no decision
counts as an edit. The correction names the candidate's id, the annotation version it corrects
(the original one when the audit ran over a corrected gold) and the value it replaces
(``was``), so applying it after the annotation changed is refused as stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._errors import InputError, OptionError
from .._validation import first_problem
from ..data import (
    Correction,
    DialogueSet,
    Located,
    Schema,
    apply_corrections,
    decided_slots,
)
from ._audit_decisions import _read_export
from ._audit_inputs import AuditSource
from ._candidate_sheet import context
from ._candidates import Candidate, base_version, candidate_id, drop_decided, find_candidates
from ._review import fix_span, review_order

DECISIONS = ("accept", "reject", "edit")
_NEEDED = ("dialogue_id", "turn_index", "slot", "gold_version", "gold_value", "predicted")


def _text(value: Any) -> str | None:
    """A cell as a value: a CSV's empty cell (and JSON null) is no value."""
    if value is None:
        return None
    text = str(value)
    return text if text.strip() else None


def corrections_from_candidates(path: str | Path, *, reviewer: str, time: datetime
                                ) -> list[dict[str, Any]]:
    """The corrections a reviewed candidates file (CSV or JSON Lines) decides, one per decided
    row, in file order; undecided rows are skipped. Raises :class:`InputError` naming file,
    line and field for an unknown decision, a missing column and two rows deciding one
    candidate differently."""
    path = Path(path)
    out: list[dict[str, Any]] = []
    seen: dict[str, tuple[int, str | None]] = {}
    for line, record in _read_export(path):
        decision = str(record.get("decision") or "").strip().lower()
        value = _text(record.get("value"))
        if not decision and value is not None:
            decision = "edit"
        if not decision:
            continue
        if decision not in DECISIONS:
            raise InputError(f"unknown decision {record.get('decision')!r} (use accept, reject, "
                             "edit with a value, or leave it blank)", path=path, line=line,
                             field="decision")
        for name in _NEEDED:
            if name not in record:
                raise InputError("a decided row needs this column (write the file with "
                                 "'dst-judge audit --candidates')", path=path, line=line,
                                 field=name)
        was = _text(record["gold_value"])
        chosen = {"accept": _text(record["predicted"]), "reject": was, "edit": value}[decision]
        try:
            turn_index = int(str(record["turn_index"]).strip())
        except ValueError:
            raise InputError(f"turn index must be a whole number, not "
                             f"{record['turn_index']!r}", path=path, line=line,
                             field="turn_index") from None
        fields: dict[str, Any] = {
            "dialogue_id": str(record["dialogue_id"]), "turn_index": turn_index,
            "slot": str(record["slot"]), "value": chosen,
            "gold": base_version(str(record["gold_version"])), "was": was,
            "reviewer": reviewer, "time": time,
            "candidate": candidate_id(str(record["dialogue_id"]), turn_index,
                                      str(record["slot"]))}
        note = _text(record.get("note"))
        if note is not None:
            fields["note"] = note.strip()
        try:
            correction = Correction.model_validate(fields)
        except ValidationError as exc:
            problem = first_problem(exc)
            raise InputError(problem.message, path=path, line=line,
                             field=".".join(str(p) for p in problem.location) or None) from None
        key = correction.candidate or ""
        earlier = seen.get(key)
        if earlier is not None:
            if earlier[1] != correction.value:
                raise InputError(f"candidate {key} is decided twice differently: line "
                                 f"{earlier[0]} gives {earlier[1]!r}, this line "
                                 f"{correction.value!r}", path=path, line=line,
                                 field="decision")
            continue
        seen[key] = (line, correction.value)
        record = correction.model_dump(mode="json", exclude_none=True)
        record.update(value=correction.value, was=correction.was)
        record.pop("adjudicated", None)
        out.append(record)
    return out


ORDERS = ("review", "evidence")
"""The orders a queue of candidates can take: ``review`` (whole turns first, the most JGA per
review) or ``evidence`` (the evidence score alone: the most likely errors first)."""


def audit_gold(dialogues: DialogueSet, corrections: Sequence[Located], *,
               schema: Schema | None = None, gold: str | None = None
               ) -> tuple[DialogueSet, str, set[tuple[str, int, str]]]:
    """The gold an audit over ``corrections`` scores against: the dialogues with the corrected
    version added, its name, and every (dialogue key, turn, slot) the corrections decide.
    Without corrections, the dialogues as they are and ``gold`` (default the first)."""
    if not corrections:
        return dialogues, dialogues.resolve_version(gold), set()
    if gold is None:
        named = list(dict.fromkeys(c.correction.gold for c in corrections))
        if len(named) > 1:
            raise OptionError(f"the corrections correct several versions ({', '.join(named)}): "
                              "say which is audited")
        gold = named[0]
    result = apply_corrections(dialogues, gold, corrections, schema=schema)
    decided = decided_slots(dialogues, result.base, corrections, schema=schema)
    return result.dialogues, result.name, decided


def open_candidates(dialogues: DialogueSet, sources: Sequence[AuditSource], *, gold: str,
                    schema: Schema | None = None,
                    decided: Iterable[tuple[str, int, str]] = (), order: str = "review"
                    ) -> tuple[list[Candidate], int]:
    """The candidates still to review, in ``order``, and how many the corrections already
    decide (left out before ordering, so the review order plans over what is open)."""
    if order not in ORDERS:
        raise OptionError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    found, dropped = drop_decided(find_candidates(dialogues, sources, gold=gold, schema=schema),
                                  decided)
    if order == "review":
        found = review_order(found, dialogues, sources, gold=gold)
    return found, dropped


def queue_records(candidates: Sequence[Candidate], dialogues: DialogueSet, gold: str,
                  sources: Sequence[AuditSource]) -> list[dict[str, Any]]:
    """What a review queue needs of each candidate, in review order: the candidates file's
    record with the dialogue up to the turn (``context``), the later turns a fix covers
    (``later``) and the candidate's place in evidence order (``evidence_rank``), so a queue
    can offer either order without ranking again."""
    evidence_rank = {id(c): position for position, c in enumerate(candidates, start=1)}
    ordered = review_order(candidates, dialogues, sources, gold=gold)
    out = []
    for candidate in ordered:
        dialogue = dialogues.get(candidate.dialogue_id)
        span = fix_span(candidate, dialogues, gold)
        record = candidate.record()
        record.update(
            evidence_rank=evidence_rank[id(candidate)], context=context(candidate, dialogues),
            later=[{"turn_index": t.turn_index, "user": t.user}
                   for t in (dialogue.turns[span.start + 1:span.stop] if dialogue else [])])
        out.append(record)
    return out
