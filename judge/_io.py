"""Reading JSON and JSON Lines files, plain or gzipped, with errors that name file and line."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ._errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def open_text(path: str | Path):
    """Open a text file for reading, transparently decompressing gzip (detected by content)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    if _is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def iter_jsonl_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every non-blank line of a JSON Lines file."""
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise InputError(f"cannot read file: {exc}", path=path) from exc


def read_text(path: str | Path) -> str:
    """A whole text file (gzip detected by content); unreadable files raise InputError."""
    try:
        with open_text(path) as handle:
            return handle.read()
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise InputError(f"cannot read file: {exc}", path=path) from exc


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file, reporting syntax errors with line and column."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg}, column {exc.colno})", path=path,
                         line=exc.lineno) from exc
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path) from None


def format_loc(loc: tuple[Any, ...]) -> str:
    """Render a pydantic error location as a JSON path: ``turns[3].pred_state.hotel-stars``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validation_error(exc: ValidationError, *, path: str | Path, line: int | None) -> InputError:
    """Turn the first pydantic error into an :class:`InputError` naming file, line and field."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(p for p in first["loc"] if p not in ("function-after", "function-before"))
    message = first["msg"]
    extra = len(exc.errors()) - 1
    if first.get("type") == "json_invalid":
        message = f"invalid JSON ({first.get('ctx', {}).get('error', message)})"
    elif "input" in first and first["type"] not in ("missing",):
        shown = repr(first["input"])
        if len(shown) > 60:
            shown = shown[:57] + "..."
        message += f" (got {shown})"
    if extra > 0:
        message += f"; {extra} more problem(s) on this line"
    return InputError(message, path=path, line=line, field=format_loc(loc) or None)


def parse_line(model: type[BaseModel], text: str, *, path: str | Path, line: int) -> Any:
    """Validate one JSON Lines record against a pydantic model."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise validation_error(exc, path=path, line=line) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path, line=line) from None
