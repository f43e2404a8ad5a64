"""How slot values compare, one definition for the audit page and the candidate ranking: equal
as RULE sees it, equal but for spelling, said in the dialogue, valid for the schema."""

from __future__ import annotations

import re

from ..data import Schema
from ..metrics import normalize_time

DONTCARE = "dontcare"
NONE_VALUE = "none"
ALTERNATIVE_SEPARATOR = "|"
"""What separates a gold value's alternatives (``a|b``: either is right)."""

ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def words(text: str) -> str:
    """Lower case, single spaces."""
    return " ".join(text.lower().split())


def alternatives(value: str, separator: str = ALTERNATIVE_SEPARATOR) -> list[str]:
    """The gold value's alternatives (the value alone when it has none)."""
    return value.split(separator) if separator and separator in value else [value]


def rule_equal(predicted: str | None, gold: str | None,
               separator: str = ALTERNATIVE_SEPARATOR) -> bool:
    """Equal as the strictest RULE sees it: identical, or one of the gold alternatives."""
    if predicted is None or gold is None:
        return predicted is gold
    return predicted == gold or predicted in alternatives(gold, separator)


def surface_form(value: str) -> str:
    """A value stripped of what annotators spell freely: case, spacing (so ``guesthouse`` =
    ``guest house``), a leading article and the time format (``7pm`` = ``19:00``)."""
    text = normalize_time(words(value))
    text = ARTICLE.sub("", text)
    return text.replace(" ", "")


def squeeze(value: str) -> str:
    """The surface form without punctuation too: ``the Gonville hotel`` = ``gonvillehotel``,
    ``guesthouse`` = ``guest house``, times as ``HH:MM`` digits."""
    return _NON_ALNUM.sub("", surface_form(value))


def mentioned(value: str, text: str, *, loose: bool = True) -> bool:
    """Whether ``value`` is said in ``text`` as whole words (ignoring case, spacing and a
    leading article).

    ``loose`` (the candidate ranking): ``dontcare`` and ``none`` are never said, and a value
    of five characters or more is also found with spaces or punctuation squeezed out
    (``pizza hut fenditton`` in ``pizza hut fen ditton``), still as whole words. Not loose
    (the audit page's rules): only ``guesthouse`` and ``guest house`` stand for each other."""
    base = words(value)
    if loose and base in (DONTCARE, NONE_VALUE, ""):
        return False
    said = words(text)
    forms = {base, ARTICLE.sub("", base)}
    if not loose:
        forms |= {f.replace("guesthouse", "guest house") for f in forms}
        forms |= {f.replace("guest house", "guesthouse") for f in forms}
    if any(f and re.search(r"(?<!\w)" + re.escape(f) + r"(?!\w)", said) for f in forms):
        return True
    if not loose:
        return False
    short = squeeze(value)
    if len(short) < 5:
        return False
    spaced = r"[\s'\-:.]?".join(re.escape(char) for char in short)
    return re.search(r"(?<![0-9a-z])" + spaced + r"(?![0-9a-z])", said) is not None


def in_schema(schema: Schema | None, slot: str, value: str) -> bool | None:
    """Whether a value is valid for a slot: in a categorical slot's value set, or in ``HH:MM``
    for a time slot; ``dontcare`` always is. None when the schema cannot tell."""
    if schema is None or slot not in schema.slots:
        return None
    spec = schema.slots[slot]
    if value == DONTCARE:
        return True
    if spec.is_categorical and spec.possible_values:
        return value in spec.possible_values
    if spec.is_time:
        return re.fullmatch(r"\d\d:\d\d", value) is not None
    return None
