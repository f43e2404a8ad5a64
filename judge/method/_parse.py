"""Turn a model's reply into a validated judgment, or say precisely why it is not one.

Real replies come as bare JSON or inside one fenced block, with naming-variant keys and values
that may be ``""``, ``none``, null, lists or numbers. Model text is only ever parsed as JSON
(never evaluated); the result is checked against a JSON Schema before anything uses it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from .._io import loads
from ._prompts import RESULT_KEYS, Dimension

MAX_DEPTH = 32
"""Deepest nesting accepted inside a judgment (a valid one nests three levels): deeper JSON
is invalid output, refused before parsing so that nothing recurses into it."""

_FENCE = re.compile(r"```(?:[A-Za-z0-9_-]+)?[ \t]*\n?(.*?)```", re.DOTALL)
_TOP_KEY = re.compile(r"[^a-z]")

# What the rest of dst-judge relies on after normalisation.
OUTPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "incorrect_domain_slot": {"type": "object"},
        "missed_domain_slot": {"type": "object"},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(OUTPUT_SCHEMA)


def response_schema(dimension: Dimension) -> dict[str, Any]:
    """The JSON Schema sent as ``response_format`` (json_schema mode) for a dimension."""
    result = {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
    properties: dict[str, Any] = {"explanation": {"type": "string"}}
    properties.update({key: result for key in RESULT_KEYS[dimension]})
    return {"type": "object", "properties": properties,
            "required": ["explanation", *RESULT_KEYS[dimension]], "additionalProperties": False}


class InvalidOutput(ValueError):
    """The reply is not a usable judgment; the message is quoted back to the model on re-ask."""


@dataclass(frozen=True)
class Judgment:
    """A parsed reply: the explanation and one result dict per expected key."""

    explanation: str
    results: dict[str, dict[str, Any]]


def extract_json_text(text: str) -> str:
    """The JSON part of a reply: a fenced block's content, else the outermost ``{...}``."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        return text[start:end + 1]
    return text.strip()


def _canonical_top_key(key: str) -> str:
    squashed = _TOP_KEY.sub("", key.lower())
    for name in ("incorrect_domain_slot", "missed_domain_slot"):
        bare = name.replace("_", "")
        if squashed in (bare, bare + "s", bare.replace("slot", "slots")):
            return name
    return "explanation" if squashed == "explanation" else key


def _as_result(value: Any, key: str) -> dict[str, Any]:
    """Accept the shapes models use for a result: object, list of names, list of pairs, empty."""
    if value is None or value == "" or value == []:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        out: dict[str, Any] = {}
        for item in value:
            if isinstance(item, str):
                out[item] = None
            elif isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
                out[item[0]] = item[1]
            elif isinstance(item, dict) and len(item) == 1:
                out.update(item)
            else:
                raise InvalidOutput(f'"{key}" must be an object mapping domain-slot names to '
                                    f"values; got a list item {json.dumps(item)[:60]}")
        return out
    raise InvalidOutput(f'"{key}" must be an object mapping domain-slot names to values; got '
                        f"{type(value).__name__}")


def parse_reply(text: str | None, dimension: Dimension) -> Judgment:
    """Parse and validate one reply for ``dimension``; raise :class:`InvalidOutput` if unusable."""
    if text is None or not text.strip():
        raise InvalidOutput("the reply is empty")
    candidate = extract_json_text(text)
    try:
        data = loads(candidate, max_depth=MAX_DEPTH)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"the reply is not valid JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InvalidOutput(f"the reply must be a JSON object, not {type(data).__name__}")
    data = {_canonical_top_key(k): v for k, v in data.items()}
    expected = RESULT_KEYS[dimension]
    missing = [key for key in expected if key not in data]
    if missing:
        raise InvalidOutput(f"the JSON object lacks the key(s) {', '.join(map(repr, missing))}")
    normalised = {key: _as_result(data[key], key) for key in expected}
    explanation = data.get("explanation", "")
    if not isinstance(explanation, str):
        explanation = json.dumps(explanation, ensure_ascii=False)
    checked = {"explanation": explanation, **normalised}
    error = next(iter(_VALIDATOR.iter_errors(checked)), None)
    if error is not None:  # pragma: no cover - normalisation guarantees the shape
        raise InvalidOutput(error.message)
    return Judgment(explanation, normalised)
