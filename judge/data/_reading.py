"""Reading the records of an input file, native JSON Lines or converted on the fly, each
with where it came from (file and line, or a place in the converted file) for messages; the
schema and dialogue-id files, which need nothing more.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from .._errors import DataMismatchError, InputError
from .._io import iter_jsonl_lines, parse_line, validation_error
from ._convert import NATIVE, Context, Kind, raise_located, read_foreign
from ._dialogues import _GOLD_KEY, version_label
from ._schema import Schema
from ._states import State

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class _Loc:
    """Where a record came from: a JSON Lines line, or a place in a converted file."""

    path: str | Path
    line: int | None
    where: str | None = None

    def field(self, name: str | None) -> str | None:
        if self.where is None:
            return name
        return f"{self.where}.{name}" if name else self.where

    def error(self, message: str, field: str | None = None, *,
              mismatch: bool = False) -> InputError:
        kind = DataMismatchError if mismatch else InputError
        return kind(message, path=self.path, line=self.line, field=self.field(field))


def _records(model: type[ModelT], path: str | Path, kind: Kind, context: Context,
             fmt: str | None) -> tuple[str, Iterator[tuple[_Loc, ModelT]]]:
    """The format name and the validated records of a file of ``kind``, native or converted."""
    found, _, located = read_foreign(path, kind, context, fmt=fmt)
    if found.name == NATIVE:
        return NATIVE, ((_Loc(path, line), _parse_native(model, text, path, line))
                        for line, text in iter_jsonl_lines(path))

    def converted() -> Iterator[tuple[_Loc, ModelT]]:
        for where, record in located():
            try:
                yield _Loc(path, None, where), model.model_validate(record)
            except ValidationError as exc:
                raise raise_located(validation_error(exc, path=path, line=None),
                                    where) from None

    return found.name, converted()


_GOLD_FIELD = re.compile(r"^turns\[(\d+)\]\.(gold_states|gold_turn_states)\.(.+)$")


def _parse_native(model: type[ModelT], text: str, path: str | Path, line: int) -> ModelT:
    """One native record; a problem inside a gold state is named by the key the file wrote
    (``gold_state_21``), not by the parsed form (``gold_states.2.1``)."""
    try:
        return parse_line(model, text, path=path, line=line)
    except InputError as exc:
        found = _GOLD_FIELD.match(exc.field or "")
        if found is None:
            raise
        index, parsed, inside = found.groups()
        try:
            turn = json.loads(text)["turns"][int(index)]
        except (ValueError, LookupError, TypeError):
            raise exc from None
        for key in turn if isinstance(turn, dict) else ():
            match = _GOLD_KEY.match(key)
            if not match or key in ("gold_states", "gold_turn_states"):
                continue
            version = version_label(match.group(2))
            if (bool(match.group(1)) == (parsed == "gold_turn_states")
                    and (inside == version or inside.startswith(version + "."))):
                raise InputError(exc.reason, path=path, line=line,
                                 field=f"turns[{index}].{key}{inside[len(version):]}") from None
        raise


def _canonical(state: State, schema: Schema, renamed: Counter[str]) -> State:
    """``state`` with every slot name the schema knows under another spelling (an alias, a
    MultiWOZ 2.2 name, ``Hotel-Price Range``) written as the schema's name; each renaming is
    counted as ``'written -> canonical'``. A slot given under both spellings keeps the value
    given under the schema's own name."""
    if all(name in schema.slots for name in state):
        return state
    out: State = {}
    for name, value in state.items():
        slot = schema.resolve_slot(name)
        if slot is None or slot == name:
            out[name] = value
            continue
        renamed[f"{name} -> {slot}"] += 1
        if slot not in state:
            out[slot] = value
    return out


def read_id_list(path: str | Path) -> list[str]:
    """Read a file of dialogue ids, one per line (blank lines and ``#`` comments ignored)."""
    ids = []
    for _, text in iter_jsonl_lines(path):
        text = text.strip()
        if text and not text.startswith("#"):
            ids.append(text)
    if not ids:
        raise InputError("no dialogue ids in file", path=path)
    return ids


def load_schema(path: str | Path, *, fmt: str | None = None) -> Schema:
    """Load and validate a schema file; errors name the file and the offending field.

    Besides the native layout, a schema may be a list of services (SGD, MultiWOZ 2.2) or a
    ConvLab-3 ``ontology.json``; those are converted on the fly (``source_format`` says which).
    """
    found, source, read = read_foreign(path, "schema", fmt=fmt)
    data = source.document if found.name == "native-schema" else read()
    try:
        schema = Schema.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, path=path, line=None) from None
    schema._source_format = found.name
    return schema
