"""Declarative rule sets: slot spellings and value rules used by the judge's rule filters.

A judge model names slots loosely (``Hotel-Price Range``, ``restaurant-book_day``) and a DST
model can predict values no schema allows (``hotel-book people: 0``). Both are schema-specific
knowledge, so they live in a JSON file (``rules/<name>.json``, validated against
``judge/formats/rules.schema.json``) instead of in code: a new data set needs a new file only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema

from .._errors import InputError, OptionError
from .._io import read_json
from .._resources import package_dir
from .._validation import schema_problem
from ..data import Schema, normalize_key

Semantics = Literal["default", "paper"]
SEMANTICS: tuple[Semantics, ...] = ("default", "paper")
RuleKind = Literal["numeric", "categorical"]

PACKAGED_RULES = "multiwoz.json"
_SPECIALS_BY_KIND: dict[str, dict[str, tuple[str, ...]]] = {
    # Used when a rule file gives no ``allowed_special``: the corrected semantics accept the
    # two special values everywhere; the reference implementation rejected them in numeric slots.
    "numeric": {"default": ("dontcare", "none"), "paper": ()},
    "categorical": {"default": ("dontcare", "none"), "paper": ("dontcare", "none")},
}
_WHOLE_NUMBER = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class ValueRule:
    """One constraint on predicted values of some slots.

    ``slots`` empty means "every slot the rule can check" (categorical: every schema slot that
    lists possible values). ``allowed_special`` maps a semantics name to values always accepted.
    """

    kind: RuleKind
    slots: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    allowed_special: dict[str, tuple[str, ...]] = field(default_factory=dict)
    enabled: bool = True
    note: str = ""

    def specials(self, semantics: Semantics) -> tuple[str, ...]:
        """Values this rule accepts unconditionally under ``semantics``."""
        if semantics in self.allowed_special:
            return self.allowed_special[semantics]
        return _SPECIALS_BY_KIND[self.kind][semantics]

    def applies_to(self, slot: str, schema: Schema) -> bool:
        """Whether the rule constrains ``slot`` (a canonical schema name)."""
        if not self.enabled:
            return False
        if self.slots:
            return slot in self.slots
        spec = schema.slots.get(slot)
        return self.kind == "categorical" and spec is not None and bool(spec.possible_values)


@dataclass(frozen=True)
class RuleSet:
    """Slot aliases and value rules for one schema; ``source`` says where they came from."""

    name: str
    slot_aliases: dict[str, str]
    value_rules: tuple[ValueRule, ...]
    source: str

    @property
    def referenced_slots(self) -> frozenset[str]:
        """Every slot name the rules point at (alias targets and listed rule slots)."""
        named = {slot for rule in self.value_rules for slot in rule.slots}
        return frozenset(named | set(self.slot_aliases.values()))


def empty_rules(source: str = "<no rules>") -> RuleSet:
    """A rule set that adds nothing: no aliases, no value rules."""
    return RuleSet(name="empty", slot_aliases={}, value_rules=(), source=source)


# --- locating and validating files ------------------------------------------------------------


def packaged_rules_path(name: str = PACKAGED_RULES) -> Path:
    """Path of a rule file shipped with dst-judge (``rules/`` in the source tree)."""
    return package_dir("rules") / name


@cache
def rules_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every rule file must satisfy."""
    return json.loads((package_dir("data/formats") / "rules.schema.json").read_text("utf-8"))


def _validate(data: Any, path: str | Path) -> None:
    validator = jsonschema.Draft202012Validator(rules_json_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        problem = schema_problem(error)
        raise InputError(f"invalid rule file: {problem.message}", path=path,
                         field=problem.path or None)


def _value_rule(raw: dict[str, Any], index: int, path: str | Path) -> ValueRule:
    specials = {
        semantics: tuple(v.strip().lower() for v in values)
        for semantics, values in raw.get("allowed_special", {}).items()
    }
    rule = ValueRule(
        kind=raw["kind"],
        slots=tuple(raw.get("slots", ())),
        minimum=raw.get("min"),
        maximum=raw.get("max"),
        allowed_special=specials,
        enabled=raw.get("enabled", True),
        note=raw.get("note", ""),
    )
    if (rule.minimum is not None and rule.maximum is not None
            and rule.minimum > rule.maximum):
        raise InputError(f"min ({rule.minimum}) is greater than max ({rule.maximum})",
                         path=path, field=f"value_rules[{index}].min")
    return rule


def load_rules(path: str | Path) -> RuleSet:
    """Read and validate a rule file; problems raise :class:`InputError` naming file and field."""
    data = read_json(path)
    _validate(data, path)
    aliases = {normalize_key(alias): target for alias, target in data.get("slot_aliases",
                                                                          {}).items()}
    rules = tuple(_value_rule(raw, i, path) for i, raw in enumerate(data["value_rules"]))
    return RuleSet(name=data["name"], slot_aliases=aliases, value_rules=rules, source=str(path))


def default_rules(schema: Schema) -> RuleSet:
    """The packaged MultiWOZ rules when ``schema`` has every slot they name, else no rules.

    Applying MultiWOZ rules to another schema would drop or reject things for no reason, so a
    schema that lacks any of their slots gets an empty rule set instead.
    """
    rules = load_rules(packaged_rules_path())
    if rules.referenced_slots <= set(schema.slots):
        return rules
    return empty_rules()


# --- slot names -------------------------------------------------------------------------------


def canonical_key(key: str, schema: Schema, rules: RuleSet) -> str | None:
    """The schema slot a model-written key means, or None when it names no slot.

    The schema resolves it first (:meth:`Schema.resolve_slot`: names and declared aliases under
    any spelling of case, ``_``, spaces, ``:`` or ``.`` as separator, then squeezed names), so
    the judge's filters, the metrics and data loading agree on every name; the rule set's own
    aliases are the last resort.
    """
    slot = schema.resolve_slot(key)
    if slot is not None:
        return slot
    wanted = normalize_key(key)
    if not wanted:
        return None
    target = rules.slot_aliases.get(wanted)
    return schema.canonical_slot(target) if target is not None else None


# --- values -----------------------------------------------------------------------------------


def check_semantics(semantics: str) -> Semantics:
    """Reject an unknown semantics name early, with the valid choices."""
    if semantics not in SEMANTICS:
        raise OptionError(f"unknown semantics {semantics!r}; choose from {', '.join(SEMANTICS)}")
    return semantics


def _violation(rule: ValueRule, slot: str, value: str, schema: Schema,
               semantics: Semantics) -> str | None:
    text = value.strip().lower()
    if text in rule.specials(semantics):
        return None
    if rule.kind == "numeric":
        if not _WHOLE_NUMBER.match(text):
            return (f"{slot} needs a whole number in {rule.minimum}..{rule.maximum}, "
                    f"got {value!r}")
        number = int(text)
        if ((rule.minimum is not None and number < rule.minimum)
                or (rule.maximum is not None and number > rule.maximum)):
            return f"{slot} value {value!r} is outside {rule.minimum}..{rule.maximum}"
        return None
    spec = schema.slots.get(slot)
    if spec is None or not spec.possible_values:
        return None
    if text in {v.strip().lower() for v in spec.possible_values}:
        return None
    return f"{slot} value {value!r} is not one of the schema's possible values"


def check_value(slot: str, value: str, rules: RuleSet, schema: Schema,
                semantics: str) -> str | None:
    """Why ``value`` breaks an enabled value rule for ``slot``, or None when it passes."""
    mode = check_semantics(semantics)
    for rule in rules.value_rules:
        if rule.applies_to(slot, schema):
            reason = _violation(rule, slot, value, schema, mode)
            if reason is not None:
                return reason
    return None
