"""Ranked candidates written out: a CSV (escaped against formula injection) or JSON Lines,
with the dialogue context and empty decision columns when it is a review sheet."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._io import open_output, plain_suffix
from ..data import DialogueSet
from ._candidates import Candidate

CSV_FIELDS: tuple[str, ...] = (
    "id", "rank", "score", "dialogue_id", "turn_index", "slot", "gold_version", "gold_value",
    "predicted", "systems", "predictions", "evidence", "other_versions")
REVIEW_FIELDS: tuple[str, ...] = ("context", "later", "decision", "value", "note")
"""Columns a file written with the dialogues adds: the dialogue up to the candidate's turn,
the user's words in the later turns a fix carries to, and the reviewer's (empty)
``decision`` (accept, reject or edit), ``value`` (an edit's value) and ``note``, which
``dst-judge corrections from-candidates`` reads back."""

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run: text starting with ``= + - @``, a tab or a
    carriage return gets a leading apostrophe (numbers stay numbers; none are negative)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def context(candidate: Candidate, dialogues: DialogueSet | None) -> list[dict[str, Any]]:
    """The dialogue up to and including the candidate's turn, as a reviewer reads it."""
    dialogue = dialogues.get(candidate.dialogue_id) if dialogues is not None else None
    if dialogue is None:
        return []
    return [{"turn_index": t.turn_index, "system": t.system, "user": t.user}
            for t in dialogue.turns[:candidate.turn_index + 1]]


def later_turns(candidate: Candidate, dialogues: DialogueSet | None) -> list[dict[str, Any]]:
    """The turns after the candidate's that a fix carries to (the annotation keeps the same
    value of the slot there), with what the user says in each."""
    dialogue = dialogues.get(candidate.dialogue_id) if dialogues is not None else None
    if dialogue is None or candidate.gold_version not in dialogue.turns[0].gold_states:
        return []
    version = candidate.gold_version
    wrong = dialogue.turns[candidate.turn_index].gold_states[version].get(candidate.slot)
    out = []
    for turn in dialogue.turns[candidate.turn_index + 1:]:
        if turn.gold_states[version].get(candidate.slot) != wrong:
            break
        out.append({"turn_index": turn.turn_index, "user": turn.user})
    return out


def _context_text(turns: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for turn in turns:
        if turn["system"]:
            lines.append(f"{turn['turn_index']} system: {turn['system']}")
        lines.append(f"{turn['turn_index']} user: {turn['user']}")
    return "\n".join(lines)


def _csv_row(candidate: Candidate, dialogues: DialogueSet | None = None) -> dict[str, Any]:
    record = candidate.record()
    record["gold_value"] = "" if record["gold_value"] is None else record["gold_value"]
    record["predicted"] = "" if record["predicted"] is None else record["predicted"]
    record["systems"] = "; ".join(record["systems"])
    record["predictions"] = "; ".join(f"{k}={'' if v is None else v}"
                                      for k, v in record["predictions"].items())
    record["evidence"] = "; ".join(e.detail for e in candidate.evidence if e.code != "prior")
    record["other_versions"] = "; ".join(f"{k}={'' if v is None else v}"
                                         for k, v in record["other_versions"].items())
    fields = CSV_FIELDS
    if dialogues is not None:
        record.update(context=_context_text(context(candidate, dialogues)),
                      later="\n".join(f"{t['turn_index']} user: {t['user']}"
                                      for t in later_turns(candidate, dialogues)),
                      decision="", value="", note="")
        fields = (*CSV_FIELDS, *REVIEW_FIELDS)
    return {name: csv_cell(record[name]) for name in fields}


def write_candidates(candidates: Sequence[Candidate], path: str | Path,
                     dialogues: DialogueSet | None = None) -> int:
    """Write ranked candidates as CSV (``.csv``, ``.csv.gz``) or JSON Lines (anything else,
    gzip under a ``.gz`` name); returns the number written. CSV cells are escaped against
    formula injection.

    With ``dialogues`` each candidate also carries its ``context`` (the dialogue up to its
    turn) and empty ``decision``/``value``/``note`` to fill in: the file is then a review
    sheet that ``dst-judge corrections from-candidates`` turns into corrections."""
    if plain_suffix(path) == ".csv":
        fields = (*CSV_FIELDS, *REVIEW_FIELDS) if dialogues is not None else CSV_FIELDS
        with open_output(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(fields))
            writer.writeheader()
            for candidate in candidates:
                writer.writerow(_csv_row(candidate, dialogues))
    else:
        with open_output(path) as handle:
            for candidate in candidates:
                record = candidate.record()
                if dialogues is not None:
                    record.update(context=context(candidate, dialogues),
                                  later=later_turns(candidate, dialogues), decision=None,
                                  value=None, note=None)
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(candidates)
