"""What every converter shares: a file read once for detection and conversion, structural fit
checks that name the first field that does not fit, and state shapes found in the wild.

A converter turns a foreign file into *native records*: plain dicts in the layout of the
project's own JSON Lines files (one dialogue per record), which the loaders then validate
exactly as if they had been read from a native file.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..._errors import InputError
from ..._io import (
    MAX_RECORD_BYTES,
    iter_jsonl_lines,
    json_error_message,
    loads,
    open_text,
    read_text,
)
from ..._names import KINDS as KINDS
from ..._names import Kind as Kind
from .._schema import Schema
from .._states import NONE, State

Layout = Literal["json", "jsonl", "dir"]

Record = dict[str, Any]
Located = tuple[str, Record]
"""A native record and where it came from in the source (a JSON path such as ``[3]`` or
``sng0073``), for error messages."""

ABSENT_VALUES = frozenset({"", "none", "not mentioned", "not given", "null"})
DONTCARE_SPELLINGS = frozenset({"dontcare", "dont care", "don't care", "do n't care",
                                "do not care", "doesn't care", "dont't care"})


# --- the source file ------------------------------------------------------------------------


@dataclass
class Source:
    """One input file (or folder), read once: detection and conversion share the parse."""

    path: Path
    layout: Layout
    document: Any = None
    """The whole file as one JSON value (layout ``json``); for ``dir``, the list of its
    ``dialogues_*.json`` documents joined."""
    first_record: Any = None
    """The first JSON Lines record (layout ``jsonl``)."""
    one_line: bool = False
    """A JSON Lines file of a single line is also a one-line JSON document."""
    first_line: int | None = None
    """Line number of the first record (layout ``jsonl``)."""

    @property
    def sample(self) -> Any:
        """The value detection looks at: the document, else the first record."""
        return self.document if self.layout != "jsonl" else self.first_record

    def records(self) -> Iterator[tuple[int, Any]]:
        """``(line, value)`` of every JSON Lines record (layout ``jsonl``)."""
        for line, text in iter_jsonl_lines(self.path):
            try:
                yield line, loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(json_error_message(exc), path=self.path, line=line) from None
            except RecursionError:
                raise InputError("JSON nested too deeply to read", path=self.path,
                                 line=line) from None


_DIR_FILES = ("dialogues_*.json", "*.json")


def open_source(path: str | Path) -> Source:
    """Read enough of ``path`` to tell its format: a JSON Lines file's first record (the rest
    is streamed later), a JSON file's whole value, or the ``dialogues_*.json`` files of a
    folder (SGD, MultiWOZ 2.2)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob(_DIR_FILES[0])) or sorted(
            p for p in path.glob(_DIR_FILES[1]) if p.name != "schema.json")
        if not files:
            raise InputError("folder holds no dialogues_*.json files", path=path)
        joined: list[Any] = []
        for file in files:
            value = _parse_whole(file, read_text(file))
            if not isinstance(value, list):
                raise InputError("expected a JSON list of dialogues", path=file)
            joined.extend(value)
        return Source(path, "dir", document=joined)
    number, first_line, more = _first_lines(path)
    if first_line is None:
        raise InputError("file is empty", path=path)
    try:
        first = loads(first_line)
    except (json.JSONDecodeError, RecursionError):
        first = None
    if isinstance(first, dict) and (more or not _looks_like_document(first)):
        return Source(path, "jsonl", first_record=first, one_line=not more, first_line=number)
    if isinstance(first, dict):  # a one-line file: a record or a whole document
        return Source(path, "jsonl", document=first, first_record=first, one_line=True,
                      first_line=number)
    return Source(path, "json", document=_parse_whole(path, read_text(path)))


def _first_lines(path: Path) -> tuple[int | None, str | None, bool]:
    """The first non-blank line of a text file (number, text), and whether another non-blank
    line follows. A line is read at most :data:`MAX_RECORD_BYTES` at a time: a first line
    longer than that is no JSON Lines record (its text is given as ``""``), so the file is
    read as one document."""
    try:
        with open_text(path) as handle:
            first: str | None = None
            number = None
            count = 0
            while line := handle.readline(MAX_RECORD_BYTES + 1):
                count += 1
                if not line.strip():
                    continue
                if first is not None:
                    return number, first, True
                if len(line) > MAX_RECORD_BYTES and not line.endswith("\n"):
                    return count, "", True
                first, number = line, count
            return number, first, False
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise InputError(f"cannot read file: {exc}", path=path) from exc


def _looks_like_document(value: dict[str, Any]) -> bool:
    return "dialogue_id" not in value


def _parse_whole(path: Path, text: str) -> Any:
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(json_error_message(exc, unit="file"), path=path,
                         line=exc.lineno) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path) from None


# --- structural fit -------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """How well a sample fits a format: ``field`` names the first field that does not fit
    (None when everything checked fits); ``score`` counts the checks passed before it, so the
    closest format can be named when none fits."""

    score: int
    field: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.field is None


class Check:
    """Collects structural checks in order; the first failure ends the fit."""

    def __init__(self) -> None:
        self.score = 0
        self.failed: Fit | None = None

    def need(self, condition: bool, field: str, reason: str) -> bool:
        if self.failed is not None:
            return False
        if condition:
            self.score += 1
            return True
        self.failed = Fit(self.score, field or "(top level)", reason)
        return False

    def result(self) -> Fit:
        return self.failed or Fit(self.score)


def first_item(value: Any) -> tuple[str, Any]:
    """``(json path, value)`` of the first element of a list or a dict (callers check that
    ``value`` is a non-empty one first)."""
    if isinstance(value, list) and value:
        return "[0]", value[0]
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return _key_path(key), value[key]
    raise ValueError("first_item needs a non-empty list or object")


def _key_path(key: str) -> str:
    return key if re.fullmatch(r"[\w.\-]+", str(key)) else json.dumps(key)


def join(path: str, key: str | int) -> str:
    """JSON path of a child: ``join('[0]', 'turns')`` → ``[0].turns``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# --- conversion context ---------------------------------------------------------------------


@dataclass
class Context:
    """What a conversion may need beyond the file: the target schema (slot and service
    names), the annotation version converted gold states are labelled with, and, for
    predictions that carry no dialogue ids, the dialogues they follow in order."""

    schema: Schema | None = None
    version: str | None = None
    dialogue_order: list[tuple[str, int]] | None = None
    """``(dialogue_id, number of turns)`` of the dialogues, in file order."""
    system_name: str | None = None
    separator: str = "|"
    notes: list[str] = field(default_factory=list)

    def gold_key(self, path: Path | None = None) -> str:
        """``gold_state_24`` for version 2.4; ``gold_state`` for an unversioned file."""
        version = self.version or (guess_version(path) if path else None) or "gold"
        return "gold_state" if version == "gold" else "gold_state_" + version.replace(".", "")


_VERSION = re.compile(r"(?:multiwoz|mwz|woz)[_\- ]?v?(2)[._]?([0-4])", re.IGNORECASE)


def guess_version(path: Path) -> str | None:
    """The MultiWOZ version a path names (``MultiWOZ_2.4/data.json`` → ``2.4``), if any."""
    match = _VERSION.search(str(path))
    return f"{match.group(1)}.{match.group(2)}" if match else None


# --- values and states ----------------------------------------------------------------------


def clean_value(value: Any) -> str | None:
    """A foreign state value as a native one: None when it means "no value" (empty, ``none``,
    ``not mentioned``), ``dontcare`` for every spelling of it, other text unchanged."""
    if value is None:
        return None
    if isinstance(value, bool):
        text = "True" if value else "False"
    elif isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        return None
    lowered = text.lower()
    if lowered in ABSENT_VALUES:
        return None
    if lowered in DONTCARE_SPELLINGS:
        return "dontcare"
    return text


def split_triple(text: str) -> tuple[str, str] | None:
    """``'hotel-book day-monday'`` → ``('hotel-book day', 'monday')``: domain and slot names
    hold no ``-``, values may (``'hotel-name-a-and-b guest house'``)."""
    parts = text.split("-", 2)
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    return f"{parts[0]}-{parts[1]}", parts[2]


def flat_state(value: Any, where: str, path: Path, *,
               keep_absent: bool = False) -> State:
    """A state in any of the shapes dumps use, as ``{domain-slot: value}``.

    Accepted: a flat dict; a nested ``{domain: {slot: value}}`` dict (also with ConvLab's
    ``{"semi": ..., "book": ...}`` halves); a list of ``"domain-slot-value"`` strings; a list of
    ``[slot, value]`` or ``[domain, slot, value]`` lists; a list of ``{"slot", "value"}`` dicts.
    Values meaning "no value" are dropped unless ``keep_absent``.
    """
    out: State = {}

    def put(slot: str, raw: Any, field: str) -> None:
        if isinstance(raw, list):
            raw = raw[0] if raw else None
        text = clean_value(raw)
        if text is None and isinstance(raw, (dict, list)):
            raise InputError(f"expected a text value, got {type(raw).__name__}", path=path,
                             field=field)
        if text is not None:
            out[slot] = text
        elif keep_absent:
            out[slot] = NONE

    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, dict):
                for slot, raw in inner.items():
                    if isinstance(raw, dict):  # {"semi": {...}, "book": {...}}
                        prefix = "book " if slot == "book" else ""
                        for sub, sub_raw in raw.items():
                            if sub != "booked":
                                put(f"{key}-{prefix}{sub}", sub_raw, join(join(where, key),
                                                                          slot))
                    else:
                        put(f"{key}-{slot}", raw, join(join(where, key), slot))
            else:
                put(str(key), inner, join(where, key))
        return out
    if isinstance(value, list):
        for position, item in enumerate(value):
            field = join(where, position)
            if isinstance(item, str):
                pair = split_triple(item)
                if pair is None:
                    raise InputError("expected 'domain-slot-value'", path=path, field=field)
                put(pair[0], pair[1], field)
            elif isinstance(item, list) and len(item) in (2, 3) and all(
                    isinstance(x, str) for x in item):
                slot = item[0] if len(item) == 2 else f"{item[0]}-{item[1]}"
                put(slot, item[-1], field)
            elif isinstance(item, dict) and "slot" in item and "value" in item:
                slot = str(item["slot"])
                if "domain" in item and "-" not in slot:
                    slot = f"{item['domain']}-{slot}"
                put(slot, item["value"], field)
            else:
                raise InputError("expected a 'domain-slot-value' string, a [slot, value] pair "
                                 "or a {slot, value} object", path=path, field=field)
        return out
    if value is None:
        return out
    raise InputError(f"expected a state (object or list), got {type(value).__name__}",
                     path=path, field=where)


def nested(state: State, rename: Callable[[str], tuple[str, str]] | None = None
           ) -> dict[str, dict[str, str]]:
    """``{domain-slot: value}`` → ``{domain: {slot: value}}`` (split at the first ``-``)."""
    out: dict[str, dict[str, str]] = {}
    for name, value in state.items():
        domain, slot = rename(name) if rename else _split_name(name)
        out.setdefault(domain, {})[slot] = value
    return out


def _split_name(name: str) -> tuple[str, str]:
    domain, _, slot = name.partition("-")
    return domain, slot


def triples(state: State) -> list[str]:
    """``{domain-slot: value}`` → sorted ``"domain-slot-value"`` strings (TRADE, SOM-DST)."""
    return sorted(f"{slot}-{value}" for slot, value in state.items())


def gold_key(record: Record) -> str:
    """The native turn field holding a dialogue's (first) gold state: ``gold_state_21``, ..."""
    keys = [k for k in record["turns"][0]
            if k.startswith("gold_state") and not k.startswith("gold_turn")]
    return keys[0] if keys else "gold_state"


def paired_turns(records: list[Record], gold: list[Record] | None
                 ) -> Iterator[tuple[Record, int, Record, State]]:
    """Each predicted turn with the gold state of the same turn in ``gold`` (native dialogues,
    matched by dialogue id; empty when absent): what the foreign dump writers pair up."""
    gold_by_id = {g["dialogue_id"]: g for g in gold or []}
    for record in records:
        reference = gold_by_id.get(record["dialogue_id"])
        key = gold_key(reference) if reference else None
        for index, turn in enumerate(record["turns"]):
            gold_state = (reference["turns"][index].get(key) or {}) if reference else {}
            yield record, index, turn, gold_state


def gold_of(turn: Record) -> dict[str, State]:
    """Version label → gold state of a native turn record (``gold_state_21`` → ``21``)."""
    out = {}
    for key, value in turn.items():
        if key.startswith("gold_state"):
            out[key] = value
    return out


def only_gold_key(records: Iterable[Record], path: Path) -> str:
    """The one ``gold_state*`` key native dialogue records carry (formats with one gold)."""
    keys: set[str] = set()
    for record in records:
        for turn in record.get("turns", []):
            keys |= set(gold_of(turn))
        break
    if len(keys) > 1:
        raise InputError(f"this format holds one annotation version; the dialogues carry "
                         f"{', '.join(sorted(keys))} (convert one with --version)", path=path)
    return next(iter(keys), "gold_state")


def service_domain(service: str, schema: Schema | None) -> str:
    """Domain name of an SGD service: the schema's domain that names it as ``service_name``,
    else the lower-cased service name without its ``_N`` suffix (``Payment_1`` → ``payment``)."""
    if schema is not None:
        for domain in schema.domains:
            if getattr(domain, "service_name", None) == service or domain.domain == service:
                return domain.domain
    return re.sub(r"_\d+$", "", service).lower()
