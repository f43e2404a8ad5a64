"""Published JSON Schemas of the input files, and a validator that reports every problem.

Loading (``load_dialogues`` etc.) stops at the first problem, which is what a scoring run wants.
Dataset maintainers fixing a file want all problems at once: :func:`validate_file` checks every
record against the JSON Schema with ``jsonschema`` and returns them all.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from .._errors import InputError, OptionError
from .._io import iter_jsonl_lines, json_error_message, loads, read_json, read_text
from .._names import FILE_KINDS as FILE_KINDS
from .._names import FileKind as FileKind
from .._resources import package_dir
from .._validation import schema_problem


@cache
def json_schema(kind: FileKind) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one input file kind (one record, for JSON Lines)."""
    if kind not in FILE_KINDS:
        raise OptionError(f"unknown file kind {kind!r}; choose from {', '.join(FILE_KINDS)}")
    text = (package_dir("data/formats") / f"{kind}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def _foreign_records(kind: FileKind, path: str | Path) -> tuple[str, Any] | None:
    """For a file in a foreign format: its format name and converted records (located);
    None for a native file (or a kind that has no other formats)."""
    if kind not in ("schema", "dialogues", "predictions"):
        return None  # labels, samples: dst-judge's own formats, nothing to convert from
    from .._errors import FormatError
    from ._convert import read_foreign

    folder = Path(path).is_dir()  # only foreign formats are folders: their error is the one
    try:
        found, _, read = read_foreign(path, kind)
    except FormatError as exc:
        if exc.reason.startswith("this is a ") or folder:
            raise  # another kind of file: say so instead of listing every mismatch
        return None  # closest to no other format: the native checks list every problem
    except InputError:
        if folder:
            raise
        return None  # not even JSON: the line-by-line checks below list the problems
    if found.name in ("native", "native-schema"):
        return None
    if kind == "schema":
        return found.name, [("(converted)", read())]
    return found.name, read()


def validate_file(kind: FileKind, path: str | Path, *, limit: int = 100) -> list[InputError]:
    """Every schema violation in ``path`` (up to ``limit``, at least 1), each naming line and
    field.

    A file in another known format (see ``dst-judge convert``) is converted first and its
    converted records are checked; a file in no known format is one problem naming the first
    field that does not fit."""
    if limit < 1:
        raise OptionError(f"the problem limit must be at least 1, got {limit} (a limit of 0 "
                          "would report every file as valid)")
    validator = _validator(kind)
    problems: list[InputError] = []
    where = Path(path)
    if where.is_dir() and kind not in ("dialogues", "predictions"):
        raise InputError(f"is a directory, not a {kind} file", path=path)

    def check(record: Any, line: int | None) -> None:
        for error in sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path)):
            if len(problems) < limit:
                problem = schema_problem(error)
                problems.append(InputError(problem.message, path=path, line=line,
                                           field=problem.path or None))

    foreign = _foreign_records(kind, path)
    if foreign is not None:
        _, records = foreign
        try:
            for where, record in records:
                before = len(problems)
                check(record, None)
                for position in range(before, len(problems)):
                    problem = problems[position]
                    problems[position] = InputError(
                        problem.reason, path=path,
                        field=f"{where}.{problem.field}" if problem.field else where)
                if len(problems) >= limit:
                    break
        except InputError as exc:
            problems.append(exc)
        return problems
    if kind == "schema":
        if not read_text(path).strip():
            raise InputError("file is empty: no schema", path=path)
        check(read_json(path), None)
        return problems
    records = 0
    for line, text in iter_jsonl_lines(path):
        records += 1
        try:
            record = loads(text)
        except json.JSONDecodeError as exc:
            problems.append(InputError(json_error_message(exc), path=path, line=line))
            continue
        except RecursionError:
            problems.append(InputError("JSON nested too deeply to read", path=path, line=line))
            continue
        if records == 1:
            other = _other_kind(kind, record)
            if other is not None:  # one sentence, not every field the other kind lacks
                return [InputError(f"this is a {other} file, not {kind}", path=path,
                                   line=line)]
        check(record, line)
        if len(problems) >= limit:
            break
    if not records:  # what every loader refuses
        blank = where.is_file() and where.stat().st_size > 0
        problems.append(InputError(f"file {'holds only blank lines' if blank else 'is empty'}"
                                   f": no {_NOUNS[kind]}", path=path))
    return problems


@cache
def _validator(kind: FileKind) -> jsonschema.Draft202012Validator:
    """The kind's validator; for corrections it also checks formats (``time`` must be an
    RFC 3339 date-time with a time zone, as reading the file requires), so one pass lists a
    bad time beside every other problem. Labels read any ISO 8601 time, so their format is
    left to the loader."""
    checker = (jsonschema.Draft202012Validator.FORMAT_CHECKER if kind == "corrections"
               else None)
    return jsonschema.Draft202012Validator(json_schema(kind), format_checker=checker)


_NOUNS = {"dialogues": "dialogues", "predictions": "predictions", "labels": "labels",
          "sample": "sampled turns", "corrections": "corrections", "schema": "schema"}
_RECORD_KINDS: tuple[FileKind, ...] = ("predictions", "dialogues", "labels", "sample",
                                       "corrections")
"""Most specific first: a predictions record fits the dialogues schema too."""


def _other_kind(kind: FileKind, record: Any) -> FileKind | None:
    """The kind of file whose schema ``record`` (a first record) fits while it does not fit
    ``kind``'s; None when it fits ``kind`` or no kind at all."""
    if _validator(kind).is_valid(record):
        return None
    return next((other for other in _RECORD_KINDS
                 if other != kind and _validator(other).is_valid(record)), None)
