"""Reading JSON and JSON Lines files, plain or gzipped, with errors that name file and line;
writing output files with errors that name the path; and making untrusted text safe to show.

Every JSON text from outside (input files, run directories, model replies) is read through
:func:`loads`, which refuses nesting deeper than a limit *before* parsing: the standard parser
recurses once per level, so a 200,000-deep file would otherwise end in a RecursionError.

A gzipped file is unpacked as it is read, one layer only: a gzip inside the gzip is refused
(a few hundred bytes of it would unpack to gigabytes), and a JSON Lines line is read at most
:data:`MAX_RECORD_BYTES` at a time, with no string in it longer than :data:`MAX_STRING_CHARS`,
so no file makes a reader hold more than one bounded record.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import tempfile
import unicodedata
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TextIO, cast

from pydantic import BaseModel, ValidationError

from ._errors import InputError, JSONTooDeep, OutputError
from ._validation import first_problem

_GZIP_MAGIC = b"\x1f\x8b"
MAX_JSON_DEPTH = 200
"""Deepest nesting accepted in input files (real ones nest fewer than ten levels; pydantic's
own JSON reader stops at about 200 too)."""
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Longest JSON Lines line the loaders read (in characters; real records are a few KB, the
service's own cap, ``max_record_mb``, is lower by default and may not exceed this)."""
MAX_STRING_CHARS = 1024 * 1024
"""Longest string in a JSON Lines record (an utterance, a note, a name): real ones are a few
hundred characters; a longer one is a mistake or an attack on every page that shows it."""
MAX_NAME_CHARS = 200
"""Longest name in a file (a reviewer, a system, an annotation version): names are repeated
in every listing and page that shows the file."""
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_exceeds(data: str | bytes, limit: int) -> int | None:
    """Where JSON text first nests deeper than ``limit`` (a character offset into the text
    with strings removed, good enough to point at), or None when it never does.

    Brackets inside strings do not count. Linear time and memory, no recursion; a text with
    at most ``limit`` opening brackets is accepted without looking further.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    skeleton = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not skeleton:
        return None
    import numpy as np

    codes = np.frombuffer(skeleton, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    over = np.flatnonzero(np.cumsum(steps) > limit)
    return int(over[0]) if over.size else None


def json_values_exceed(data: bytes, limit: int) -> bool:
    """Whether JSON text may hold more than ``limit`` values, counted without parsing it:
    separators and opening brackets outside strings, plus one (never fewer than the values
    there are). Parsing a million small numbers costs a hundred times their bytes; counting
    costs one pass of ``bytes.count``, and a copy without strings only past the first guess."""
    def count(text: bytes) -> int:
        return text.count(b",") + text.count(b"[") + text.count(b"{") + 1

    return count(data) > limit and count(_JSON_STRING.sub(b"", data)) > limit


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that raises :class:`JSONTooDeep` (a ``JSONDecodeError``) instead of
    recursing into JSON nested deeper than ``max_depth``."""
    position = nesting_exceeds(text, max_depth)
    if position is not None:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise JSONTooDeep(f"nested deeper than {max_depth} levels", doc, 0)
    return json.loads(text)


def json_error_message(exc: json.JSONDecodeError, *, unit: str = "line") -> str:
    """What is wrong with a JSON text, for a person: the column (and, for a text of several
    lines, the line) where parsing stopped, the parser's reason, and "the line ends early" when
    the text stops before its JSON does: a line cut off (a truncated download, a copy that
    stopped) is the usual cause, and the parser's own words for it ("Unterminated string
    starting at", "Invalid control character at", "Expecting value") do not say so.
    ``unit`` names the text in that sentence (``line`` for JSON Lines, ``file``)."""
    if isinstance(exc, JSONTooDeep):
        return f"invalid JSON: {exc.msg}"
    reason = re.sub(r"\s*(starting )?at$", "", exc.msg).strip() or "not JSON"
    reason = reason[0].lower() + reason[1:]
    doc = exc.doc if isinstance(exc.doc, str) else ""
    where = f"column {exc.colno}" if unit == "line" else f"line {exc.lineno}, column {exc.colno}"
    early = bool(doc) and _ends_early(exc, doc)
    if early and exc.msg.startswith(("Unterminated string", "Invalid control character")):
        reason = "a string is still open where the text stops"
    text = f"invalid JSON at {where}: {reason}"
    if early:
        text += f"; the {unit} ends early (cut off?)"
    return text


def _ends_early(exc: json.JSONDecodeError, doc: str) -> bool:
    """Whether parsing failed because the text stopped: an open string runs to its end, or
    nothing but white space follows the point where the parser gave up."""
    if exc.msg.startswith("Unterminated string"):
        return True
    if exc.msg.startswith("Extra data"):
        return False
    return not doc[exc.pos:].strip() or (exc.msg.startswith("Invalid control character")
                                         and not doc[exc.pos:].strip(" \t\r\n"))


_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co"})
_KEPT_CONTROLS = frozenset("\n\t")


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 label``, ``2 labels``, ``0 labels`` (``many`` when adding an s is wrong)."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def printable(text: object, *, newlines: bool = True) -> str:
    """Text from data or from a server, safe to print on a terminal: control characters
    (ANSI escapes, bells, carriage returns), format characters (bidirectional overrides,
    zero-width marks) and unpaired surrogates are removed; tabs and, with ``newlines``,
    line breaks are kept (otherwise they become spaces)."""
    value = str(text)
    if value.isprintable():
        return value
    out = []
    for char in value:
        if char in _KEPT_CONTROLS:
            out.append(char if newlines else " ")
        elif unicodedata.category(char) not in _UNSAFE_CATEGORIES:
            out.append(char)
    return "".join(out)


def gzip_name(path: str | Path) -> bool:
    """Whether a file name promises gzip (``.gz``, any case): such an output is written
    compressed, so that the name tells the truth to every other tool."""
    return Path(path).name.lower().endswith(".gz")


def plain_suffix(path: str | Path) -> str:
    """The suffix of what a file holds, lower case, past a ``.gz``: ``.csv`` for
    ``table.csv.gz`` as for ``table.csv`` (formats are chosen by it)."""
    name = Path(path).name.lower()
    return Path(name[:-3] if gzip_name(name) else name).suffix


@contextlib.contextmanager
def open_output(path: str | Path, mode: str = "w", *,
                newline: str | None = None) -> Iterator[IO[Any]]:
    """Open an output file (parent folders created), turning every way it can fail (a
    directory, a read-only or missing folder, a full disk) into :class:`OutputError` naming
    the path. Text modes write UTF-8. A name ending in ``.gz`` is written gzip-compressed (the
    readers detect gzip by content, so such a file reads back as it was written); every
    writer of the project goes through here, so none writes plain text under a gzip name."""
    target = Path(path)
    try:
        if target.is_dir():
            raise IsADirectoryError(21, "it is a directory, not a file")
        target.parent.mkdir(parents=True, exist_ok=True)
        handle: IO[Any]
        binary = "b" in mode
        if gzip_name(target):
            packed = mode.replace("t", "").replace("b", "") + ("b" if binary else "t")
            # closed by the ``with handle`` below, as the plain files are
            if binary:
                handle = cast(IO[bytes], gzip.open(target, packed))  # noqa: SIM115
            else:
                handle = cast(IO[str], gzip.open(target, packed,  # noqa: SIM115
                                                 encoding="utf-8", newline=newline))
        elif binary:
            handle = target.open(mode)
        else:
            handle = target.open(mode, encoding="utf-8", newline=newline)
        with handle:
            yield handle
    except OSError as exc:
        raise OutputError(f"cannot write: {exc.strerror or exc}", path=target) from None


def write_text(path: str | Path, text: str) -> Path:
    """Write a whole text file through :func:`open_output` (same errors)."""
    with open_output(path) as handle:
        handle.write(text)
    return Path(path)


def replace_whole(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Write a file whole or not at all: ``write`` fills a temporary file in the same folder,
    which then replaces ``path`` (a kill mid-write leaves the old file). The temporary name is
    new on every call, so threads or processes writing one path at once never share one: each
    renames a whole file, and the last one stays."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        write(part)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def check_output_dir(path: str | Path) -> Path:
    """Make sure results can be written into directory ``path`` (created when missing, and
    tried with a scratch file): an :class:`OutputError` before any work (or payment)
    starts, instead of a failure after it."""
    folder = Path(path)
    try:
        if not str(path).strip():
            raise FileNotFoundError(2, "the path is empty")
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(20, "it is a file, not a directory")
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".dst-judge-write-test-"):
            pass  # a name of its own: threads that check one folder at once do not collide
    except OSError as exc:
        raise OutputError(f"cannot write into this directory: {exc.strerror or exc}",
                          path=folder) from None
    return folder


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _refuse_nested_gzip(path: Path) -> None:
    """A gzip whose content is gzip again is refused: one layer is unpacked, never two (an
    inner layer of 1 MB may hold a GB, and its ratio looks harmless from outside)."""
    try:
        with gzip.open(path, "rb") as handle:
            head = handle.read(2)
    except (OSError, EOFError, zlib.error):
        return  # a broken gzip: reading it says what is wrong
    if head == _GZIP_MAGIC:
        raise InputError("gzip inside gzip: the file is compressed twice; unpack it once "
                         "(gunzip) and give the result (nested compression is refused)",
                         path=path)


def open_text(path: str | Path) -> TextIO:
    """Open a text file for reading, transparently decompressing gzip (detected by content,
    one layer: a gzip inside it is refused)."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory, not a file", path=path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    if _is_gzip(path):
        _refuse_nested_gzip(path)
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return path.open("r", encoding="utf-8")


_TEXT_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def long_string(text: str, limit: int = MAX_STRING_CHARS) -> tuple[str, int] | None:
    """The JSON path and length of the first string (a value or a key) in the JSON text that
    is longer than ``limit`` characters, or None. Costs nothing for a text shorter than the
    limit; otherwise one scan, and a parse only when a long string is there."""
    if len(text) <= limit + 2 or not any(
            match.end() - match.start() > limit + 2 for match in _TEXT_STRING.finditer(text)):
        return None
    try:
        value = loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None  # not JSON: the loader says so
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if len(item) > limit:
                return where, len(item)
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                if len(key) > limit:
                    return (where or "(a key)"), len(key)
                stack.append((f"{where}.{key}" if where else str(key), inner))
        elif isinstance(item, list):
            stack.extend((f"{where}[{index}]", inner)
                         for index, inner in reversed(list(enumerate(item))))
    return None


def _check_line(text: str, number: int, path: str | Path, max_chars: int,
                max_string: int | None) -> None:
    """A line past the record cap, or holding a string past the string cap: InputError."""
    if len(text) > max_chars and not text.endswith("\n"):
        raise InputError(f"the line is longer than the limit of {max_chars:,} characters for "
                         "one record (a file that is not JSON Lines, or a broken one?)",
                         path=path, line=number)
    found = None if max_string is None else long_string(text, max_string)
    if found is not None:
        raise InputError(f"a string of {found[1]:,} characters; the limit for one string is "
                         f"{max_string:,}", path=path, line=number, field=found[0] or None)


def iter_jsonl_lines(path: str | Path, *, max_chars: int = MAX_RECORD_BYTES,
                     max_string: int | None = MAX_STRING_CHARS) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every non-blank line of a JSON Lines file. A line is
    read at most ``max_chars`` at a time: a longer one (or one holding a string longer than
    ``max_string``) is an InputError naming the line, never held whole. Files whose strings
    have caps of their own (model replies: batch output, a run's rows) pass
    ``max_string=None``."""
    try:
        with open_text(path) as handle:
            number = 0
            while line := handle.readline(max_chars + 1):
                number += 1
                if line.strip():
                    _check_line(line, number, path, max_chars, max_string)
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
        return loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(json_error_message(exc, unit="file"), path=path,
                         line=exc.lineno) from exc
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path) from None


def validation_error(exc: ValidationError, *, path: str | Path, line: int | None) -> InputError:
    """Turn the first pydantic error into an :class:`InputError` naming file, line and field
    (see :func:`judge._validation.first_problem`), with the value it found."""
    problem = first_problem(exc)
    message = problem.message
    if problem.kind == "json_invalid":
        message = f"invalid JSON ({problem.context.get('error', message)})"
    elif problem.kind != "missing":
        shown = repr(problem.value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        message += f" (got {shown})"
    if problem.more > 0:
        message += f"; {plural(problem.more, 'more problem', 'more problems')} on this line"
    return InputError(message, path=path, line=line, field=problem.path or None)


def parse_line(model: type[BaseModel], text: str, *, path: str | Path, line: int) -> Any:
    """Validate one JSON Lines record against a pydantic model."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        if first_problem(exc).kind == "json_invalid":
            try:  # the standard parser's account of the same error: column, a line cut off
                loads(text)
            except json.JSONDecodeError as bad:
                raise InputError(json_error_message(bad), path=path, line=line) from None
            except RecursionError:
                pass
        raise validation_error(exc, path=path, line=line) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path, line=line) from None
