"""An annotator's decisions, exported from the audit page as CSV or JSON Lines, read back as
human labels (one record per decided turn), each bad line named by file, line and field."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._io import json_error_message, loads, plain_suffix, read_text

_DECISIONS = {"correct": 1, "1": 1, "true": 1, "incorrect": 0, "0": 0, "false": 0}


def _read_export(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) pairs of a CSV or JSON Lines export, chosen by suffix, else by content."""
    text = read_text(path).removeprefix("\ufeff")
    suffix = plain_suffix(path)
    is_jsonl = suffix in (".jsonl", ".json", ".ndjson") or (
        suffix != ".csv" and text.lstrip().startswith("{"))
    if is_jsonl:
        records = []
        # split on "\n" only: a note may hold U+2028, which JSON.stringify leaves raw
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(json_error_message(exc), path=path, line=number) from None
            except RecursionError:
                raise InputError("JSON nested too deeply to read", path=path,
                                 line=number) from None
            if not isinstance(record, dict):
                raise InputError("each line must be a JSON object", path=path, line=number)
            records.append((number, record))
        return records
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames  # reads the first line (a NUL in it: csv.Error on 3.10)
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", path=path, line=1) from None
    if not header:
        return []
    missing = [f for f in ("dialogue_id", "turn_index", "decision") if f not in header]
    if missing:
        raise InputError("the CSV header lacks this column", path=path, line=1, field=missing[0])
    records = []
    try:
        for record in reader:
            # line_num is the record's last line; quoted line breaks tell how far back it began
            breaks = sum(v.count("\n") for v in record.values() if isinstance(v, str))
            records.append((reader.line_num - breaks,
                            {k: _unguard(v) for k, v in record.items()}))
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", path=path, line=reader.line_num) from None
    return records


_GUARDED = ("=", "+", "-", "@", "\t", "\r", "'")
"""The page's CSV export puts a ``'`` before cells starting with these (a spreadsheet would
run ``=cmd|...`` as a formula); reading an export takes that quote off again."""


def _unguard(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 1 and value[0] == "'" and \
            value[1] in _GUARDED:
        return value[1:]
    return value


def _decision(value: Any) -> int | None:
    """1, 0, or None for blank; raises ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    text = str(value).strip().lower()
    if not text:
        return None
    if text in _DECISIONS:
        return _DECISIONS[text]
    raise ValueError(value)


def import_decisions(path: str | Path, *, annotator: str | None = None) -> list[dict[str, Any]]:
    """Human labels from an annotator's export: one record per decided turn.

    Several items of one turn must carry the same decision; a blank decision is skipped.
    ``annotator`` fills in for rows that name none.
    """
    path = Path(path)
    labels: dict[tuple[str, int], dict[str, Any]] = {}
    for line, record in _read_export(path):
        try:
            label = _decision(record.get("decision"))
        except ValueError:
            raise InputError(f"unknown decision {record.get('decision')!r} (use correct, "
                             "incorrect, 1, 0 or leave it blank)", path=path, line=line,
                             field="decision") from None
        if label is None:
            continue
        dialogue_id = str(record.get("dialogue_id") or "").strip()
        if not dialogue_id:
            raise InputError("missing dialogue id", path=path, line=line, field="dialogue_id")
        try:
            turn_index = int(str(record.get("turn_index")).strip())
        except ValueError:
            turn_index = -1
        if turn_index < 0:
            raise InputError(f"turn index must be a whole number ≥ 0, not "
                             f"{record.get('turn_index')!r}", path=path, line=line,
                             field="turn_index")
        note = str(record.get("note") or "").strip()
        who = str(record.get("annotator") or "").strip() or annotator
        key = (dialogue_id, turn_index)
        known = labels.get(key)
        if known is None:
            labels[key] = {"dialogue_id": dialogue_id, "turn_index": turn_index,
                           "label": label, "annotator": who, "notes": [note] if note else [],
                           "line": line}
            continue
        if known["label"] != label:
            raise InputError(f"conflicting decisions for {dialogue_id} turn {turn_index}: "
                             f"line {known['line']} says {known['label']}, this line {label}",
                             path=path, line=line, field="decision")
        if note and note not in known["notes"]:
            known["notes"].append(note)
        known["annotator"] = known["annotator"] or who
    return [{"dialogue_id": r["dialogue_id"], "turn_index": r["turn_index"], "label": r["label"],
             "annotator": r["annotator"], "note": "; ".join(r["notes"])}
            for r in labels.values()]
