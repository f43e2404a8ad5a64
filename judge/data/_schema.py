"""The slot schema: which domains and slots exist, their values, descriptions and aliases.

Any schema file in the layout of ``shared/data/*/schema.json`` loads as it is: a list of
domains, each with a list of slots named ``<domain>-<slot>``. Extra fields are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator


class SlotSpec(BaseModel):
    """One slot of the schema, e.g. ``hotel-pricerange``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1, description="Slot name as written in the data.")
    domain: str | None = None
    slot: str | None = None
    description: str = ""
    is_categorical: bool = False
    is_booking_slot: bool = False
    possible_values: list[str] = Field(default_factory=list)
    value_format: str | None = None
    aliases: list[str] = Field(
        default_factory=list, description="Other spellings of this slot name (e.g. MultiWOZ 2.2)."
    )
    multiwoz22_name: str | None = None

    @property
    def prompt_description(self) -> str:
        """The description as prompt text: one line, ending in punctuation (see
        :func:`prompt_text`)."""
        return prompt_text(self.description)

    @property
    def is_time(self) -> bool:
        """Whether values are clock times (drives time normalisation)."""
        if self.value_format and "HH:MM" in self.value_format:
            return True
        tail = self.name.split("-", 1)[-1].replace(" ", "")
        return tail in {"leaveat", "arriveby", "booktime"}


class DomainSpec(BaseModel):
    """One domain (service) with its slots."""

    model_config = ConfigDict(extra="allow", frozen=True)

    domain: str = Field(min_length=1)
    description: str = ""
    slots: list[SlotSpec]

    @property
    def prompt_description(self) -> str:
        """The description as prompt text (see :func:`prompt_text`)."""
        return prompt_text(self.description)

    @model_validator(mode="after")
    def _fill_slot_domain(self) -> DomainSpec:
        for slot in self.slots:
            if slot.domain is not None and slot.domain != self.domain:
                raise ValueError(
                    f"slot {slot.name!r} says domain {slot.domain!r} inside domain {self.domain!r}"
                )
        return self


_SPACES = re.compile(r"\s+")
_DASH = re.compile(r"\s*-\s*")
_OTHER_SEPARATOR = re.compile(r"\s*[:.]\s*")
_TERMINAL = (".", "!", "?", ":", ";")


def normalize_key(key: str) -> str:
    """Spelling-neutral form of a slot key: ``' Train - Leave_At '`` → ``'train-leave at'``.

    A key with no ``-`` may separate domain and slot with ``:`` or ``.`` instead
    (``Taxi:departure``, ``Train.arrive by``): the first of those becomes the ``-``.
    """
    text = key.strip().lower().replace("_", " ")
    text = _SPACES.sub(" ", text)
    if "-" not in text:
        text = _OTHER_SEPARATOR.sub("-", text, count=1)
    return _DASH.sub("-", text)


def prompt_text(text: str | None) -> str:
    """A schema description made safe to place inside a prompt line.

    Descriptions come from data sets (SGD's often lack a final full stop) and from users, so
    before a template puts one between other fields it is *fenced*: line breaks and runs of
    whitespace collapse to one space, so it cannot start a heading, a list item or a new field;
    and *punctuated*: it ends with a full stop unless it already ends with sentence punctuation,
    so the next field ("Allowed values: ...") never runs into it. Empty stays empty.
    """
    flat = _SPACES.sub(" ", text or "").strip()
    if not flat:
        return ""
    if flat.endswith(_TERMINAL) or flat.endswith((".)", '."', ".'")):
        return flat
    return flat + "."


@dataclass(frozen=True)
class KeyIndex:
    """Normalised slot spellings of a schema, for resolving model-written keys."""

    names: dict[str, str]
    """normalised slot name → slot name"""
    aliases: dict[str, str]
    """normalised alias → slot name (the first alias wins when two normalise alike)"""
    squeezed: dict[str, frozenset[str]]
    """normalised name with all spaces removed → the slot names that squeeze to it"""
    domains: frozenset[str] = frozenset()
    """normalised domain names"""


class Schema(BaseModel):
    """A DST schema: domains and slots, plus the conventions of the data set."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = ""
    domains: list[DomainSpec] = Field(min_length=1)
    multi_value_separator: str = Field(
        "|", min_length=1, pattern=r"\S",
        description="Separates alternative values in one gold value (not empty or blank).")
    special_values: dict[str, str] = Field(default_factory=dict)
    _source_format: str = PrivateAttr(default="native-schema")

    @property
    def source_format(self) -> str:
        """The format the schema file was in (``native-schema`` unless converted)."""
        return self._source_format

    @model_validator(mode="after")
    def _unique_names(self) -> Schema:
        seen: set[str] = set()
        for domain in self.domains:
            for slot in domain.slots:
                if slot.name in seen:
                    raise ValueError(f"slot {slot.name!r} is defined twice")
                seen.add(slot.name)
        if not seen:
            raise ValueError("the schema defines no slots (every domain's 'slots' list is "
                             "empty); slot accuracy and the judge need at least one")
        return self

    @cached_property
    def slots(self) -> dict[str, SlotSpec]:
        """Slot name → spec, in schema order."""
        return {slot.name: slot for domain in self.domains for slot in domain.slots}

    @cached_property
    def slot_names(self) -> tuple[str, ...]:
        return tuple(self.slots)

    @cached_property
    def domain_names(self) -> tuple[str, ...]:
        return tuple(d.domain for d in self.domains)

    @cached_property
    def slot_domain(self) -> dict[str, str]:
        """Slot name → domain name, for every slot of the schema."""
        return {slot.name: d.domain for d in self.domains for slot in d.slots}

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Alternative slot spelling → canonical slot name (declared aliases, MultiWOZ 2.2)."""
        table: dict[str, str] = {}
        for slot in self.slots.values():
            for alias in [*slot.aliases, slot.multiwoz22_name]:
                if alias and alias != slot.name:
                    table[alias] = slot.name
        return table

    @cached_property
    def key_index(self) -> KeyIndex:
        names = {normalize_key(name): name for name in self.slot_names}
        aliases: dict[str, str] = {}
        for alias, target in self.aliases.items():
            aliases.setdefault(normalize_key(alias), target)
        squeezed: dict[str, set[str]] = {}
        for norm, name in names.items():
            squeezed.setdefault(norm.replace(" ", ""), set()).add(name)
        for norm, target in aliases.items():
            squeezed.setdefault(norm.replace(" ", ""), set()).add(target)
        domains = frozenset(normalize_key(d) for d in self.domain_names)
        return KeyIndex(names, aliases, {k: frozenset(v) for k, v in squeezed.items()}, domains)

    @cached_property
    def time_slots(self) -> frozenset[str]:
        return frozenset(name for name, spec in self.slots.items() if spec.is_time)

    def domain_of(self, slot: str) -> str:
        """Domain of a slot; for slots outside the schema, the part before the first ``-``."""
        return self.slot_domain.get(slot) or slot.split("-", 1)[0]

    def canonical_slot(self, name: str) -> str | None:
        """The schema's name for ``name`` (itself or via an alias), or None if unknown."""
        if name in self.slots:
            return name
        return self.aliases.get(name)

    def resolve_slot(self, key: str) -> str | None:
        """The schema slot a loosely written key means, or None when it names no slot.

        Tried in order: the name itself or a declared alias; then, on the spelling-neutral form
        (:func:`normalize_key`: case, ``_``, spaces, ``:`` or ``.`` for ``-``), schema names and
        aliases; a key without a separator whose first word is a domain (``taxi departure``);
        and last the name with every space removed when exactly one slot squeezes to it
        (``hotel-price range``, ``hotel-bookday``). Data loading, the metrics and the judge's
        filters all resolve names through this one function.
        """
        exact = self.canonical_slot(key)
        if exact is not None:
            return exact
        wanted = normalize_key(key)
        if not wanted:
            return None
        index = self.key_index
        if "-" not in wanted:
            head, _, tail = wanted.partition(" ")
            if tail and head in index.domains:
                wanted = f"{head}-{tail}"
        if wanted in index.names:
            return index.names[wanted]
        if wanted in index.aliases:
            return index.aliases[wanted]
        hits = index.squeezed.get(wanted.replace(" ", ""), ())
        return next(iter(hits)) if len(hits) == 1 else None
