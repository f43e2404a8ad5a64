"""Published JSON Schemas of the input files, and a validator that reports every problem.

Loading (``load_dialogues`` etc.) stops at the first problem, which is what a scoring run wants.
Dataset maintainers fixing a file want all problems at once: :func:`validate_file` checks every
record against the JSON Schema with ``jsonschema`` and returns them all.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema

from .._errors import InputError, OptionError
from .._io import iter_jsonl_lines, json_error_message, loads, read_json
from .._resources import package_dir
from .._validation import schema_problem

FileKind = Literal["schema", "dialogues", "predictions", "labels", "sample", "corrections"]
FILE_KINDS: tuple[FileKind, ...] = ("schema", "dialogues", "predictions", "labels", "sample",
                                    "corrections")


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

    try:
        found, _, read = read_foreign(path, kind)
    except FormatError as exc:
        if exc.reason.startswith("this is a "):
            raise  # another kind of file: say so instead of listing every mismatch
        return None  # closest to no other format: the native checks list every problem
    except InputError:
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
    validator = jsonschema.Draft202012Validator(json_schema(kind))
    problems: list[InputError] = []

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
        check(read_json(path), None)
        return problems
    for line, text in iter_jsonl_lines(path):
        try:
            record = loads(text)
        except json.JSONDecodeError as exc:
            problems.append(InputError(json_error_message(exc), path=path, line=line))
            continue
        except RecursionError:
            problems.append(InputError("JSON nested too deeply to read", path=path, line=line))
            continue
        check(record, line)
        if len(problems) >= limit:
            break
    return problems
