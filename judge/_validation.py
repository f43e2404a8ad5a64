"""One way to say what failed validation, wherever it fails: the first problem of a pydantic
``ValidationError`` (or of FastAPI's request validation, or a jsonschema error) as a JSON path
into the checked value and a message.

pydantic's locations also name the member of a union a value was tried against (``str``,
``list[str]``, ``function-after[...]``) and its messages of validators start with
``Value error,``; neither means anything to the person who wrote the value, so both are dropped
here. Each caller frames the result its own way (a file and line, a CLI flag, a form field, an
API error body).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    import jsonschema

REQUEST_PARTS = ("body", "query", "path", "header", "cookie")
"""Where FastAPI says a request's bad value was: dropped from the front of its path."""

_SCALAR_TAGS = frozenset({"str", "int", "float", "bool", "bytes", "none", "date", "datetime",
                          "time", "decimal", "url"})
_TAG = re.compile(r"[a-z][a-z-]*\[.*\]|_[A-Za-z]\w*", re.DOTALL)
_PREFIXES = ("Value error, ", "Assertion failed, ")


def _is_tag(part: str | int, place: int = 1, size: int = 2) -> bool:
    """A location step pydantic adds for a union member or a validator function (``str``,
    ``list[str]``, ``literal['a']``, ``function-after[check(), str]``, a private model).

    A bare scalar name (``str``, ``time``, ...) is also a field name people use (a label's
    ``time``): it is taken as a union member's tag only at the end of a location and after a
    field (``("stars", "int")``), where pydantic puts a scalar member's tag (a scalar has no
    fields below it); ``place`` and ``size`` say where ``part`` stands in its location."""
    if not isinstance(part, str):
        return False
    if _TAG.fullmatch(part):
        return True
    return part in _SCALAR_TAGS and 0 < place == size - 1


def json_path(location: Iterable[str | int]) -> str:
    """A location as a JSON path: ``turns[3].pred_state.hotel-stars``; ``""`` for the whole
    value."""
    out = ""
    for part in location:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class Problem:
    """The first thing wrong with a validated value."""

    location: tuple[str | int, ...]
    """Where, as keys and indexes from the top of the value (union tags dropped)."""
    message: str
    kind: str = ""
    """pydantic's error type (``missing``, ``json_invalid``, ...); jsonschema's keyword."""
    value: Any = None
    """The value that failed. Callers that show it cut it short: it may be huge or a secret."""
    union: bool = False
    """The value was tried against the members of a union (and fitted none)."""
    context: Mapping[str, Any] = field(default_factory=dict)
    more: int = 0
    """How many further problems the error holds."""

    @property
    def path(self) -> str:
        """:attr:`location` as a JSON path (``""`` for the whole value)."""
        return json_path(self.location)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.location else self.message


def first_problem(error: ValidationError | Sequence[Mapping[str, Any]], *,
                  skip: Collection[str] = ()) -> Problem:
    """The first problem of a pydantic error (or of the list of error dicts that FastAPI's
    ``RequestValidationError.errors()`` returns). A first location step in ``skip`` (such as
    :data:`REQUEST_PARTS`) is dropped when something follows it."""
    errors = (error.errors(include_url=False) if isinstance(error, ValidationError)
              else list(error))
    if not errors:
        return Problem((), "invalid value")
    first: Mapping[str, Any] = errors[0]
    raw = tuple(first.get("loc") or ())
    tags = [_is_tag(part, place, len(raw)) for place, part in enumerate(raw)]
    location = tuple(part for part, tag in zip(raw, tags, strict=True) if not tag)
    if len(location) > 1 and location[0] in skip:
        location = location[1:]
    message = str(first.get("msg") or "invalid value")
    for prefix in _PREFIXES:
        message = message.removeprefix(prefix)
    return Problem(location, message, kind=str(first.get("type", "")), value=first.get("input"),
                   union=any(tags),
                   context=first.get("ctx") or {}, more=len(errors) - 1)


def schema_problem(error: jsonschema.ValidationError) -> Problem:
    """A jsonschema error as a :class:`Problem` (its path into the instance, its message)."""
    location = tuple(p for p in error.absolute_path if isinstance(p, str | int))
    return Problem(location, error.message, kind=str(error.validator), value=error.instance)
