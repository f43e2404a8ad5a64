"""Value-matching policies shared by every metric of a run.

A policy is a name, or several joined by ``+`` (``normalized+alternatives``):

* ``exact``        identical strings (default);
* ``nospace``      spaces removed before comparing;
* ``normalized``   case, whitespace, leading articles, MultiWOZ time forms, ``guesthouse``,
  ``free`` → ``yes`` for parking/internet;
* ``alternatives`` a gold value ``a|b`` accepts either ``a`` or ``b``.

Metrics never call the policy pair by pair: :meth:`MatchPolicy.prepare` rewrites a dialogue's
gold and predicted states once, so that plain equality afterwards means "matches".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .._errors import OptionError
from ..data import State

POLICY_NAMES = ("exact", "nospace", "normalized", "alternatives")

_ARTICLE = re.compile(r"^(the|a|an)\s+")
_SPACES = re.compile(r"\s+")
_AMPM = re.compile(r"^(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?m\.?$")
_CLOCK = re.compile(r"^(\d{1,2})[:.](\d{2})$")
_DIGITS = re.compile(r"^(\d{1,2})(\d{2})$")
_YES_SLOTS = ("parking", "internet")


def normalize_time(value: str) -> str:
    """MultiWOZ time forms to ``HH:MM``: ``7pm`` → ``19:00``, ``1715`` → ``17:15``, ``9:30`` →
    ``09:30``. Anything else is returned unchanged."""
    match = _AMPM.match(value)
    if match:
        hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
        if 1 <= hour <= 12 and minute < 60:
            hour = hour % 12 + (12 if half == "p" else 0)
            return f"{hour:02d}:{minute:02d}"
        return value
    match = _CLOCK.match(value) or _DIGITS.match(value)
    if match:
        hour, minute = int(match.group(1)), int(match.group(2))
        if hour < 24 and minute < 60:
            return f"{hour:02d}:{minute:02d}"
    return value


def normalize_value(slot: str, value: str, time_slots: frozenset[str] = frozenset()) -> str:
    """The ``normalized`` policy's canonical form of one value."""
    text = _SPACES.sub(" ", value.strip().lower())
    text = _ARTICLE.sub("", text)
    text = text.replace("guesthouse", "guest house")
    if slot in time_slots:
        text = normalize_time(text)
    if text == "free" and slot.endswith(_YES_SLOTS):
        text = "yes"
    return text


def _nospace(slot: str, value: str) -> str:
    return value.replace(" ", "")


_FOLDED = str.maketrans({"'": "", "\u2019": "", "`": "", ",": " ", "!": " ", "?": " ",
                         ";": " ", '"': " "})


def loose_form(slot: str, value: str, time_slots: frozenset[str] = frozenset()) -> str:
    """The form in which two spellings of one value are the same value.

    It is the ``normalized`` policy's form (case, whitespace, leading article, time forms,
    ``guesthouse``, ``free``), with apostrophes dropped, ``, ! ? ; "`` folded and then every space
    removed, as under ``nospace``: ``Saint John's College`` and ``saint john s college`` are
    both ``saintjohnscollege``.
    """
    text = normalize_value(slot, value, time_slots).translate(_FOLDED)
    return normalize_value(slot, text, time_slots).replace(" ", "")


def same_value(slot: str, left: str, right: str,
               time_slots: frozenset[str] = frozenset()) -> bool:
    """Whether two values of ``slot`` are one value written two ways (see :func:`loose_form`).

    The judge's filters use this wherever they compare values (a repeated pair, a slot missed
    again with the value it already has), so they agree with the metrics' value matching.
    """
    return left == right or loose_form(slot, left, time_slots) == loose_form(slot, right,
                                                                              time_slots)


@dataclass(frozen=True)
class MatchPolicy:
    """A parsed matching policy; build one with :func:`parse_policy`."""

    name: str
    alternatives: bool = False
    separator: str = "|"
    steps: tuple[str, ...] = ()
    time_slots: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @property
    def is_identity(self) -> bool:
        return not self.steps

    def normalize(self, slot: str, value: str) -> str:
        """The form in which values are compared."""
        for step in self.steps:
            if step == "nospace":
                value = _nospace(slot, value)
            else:
                value = normalize_value(slot, value, self.time_slots)
        return value

    def alternatives_of(self, slot: str, gold: str) -> list[str]:
        """Normalised acceptable values for a gold value."""
        if self.alternatives and self.separator in gold:
            return [self.normalize(slot, part) for part in gold.split(self.separator)]
        return [self.normalize(slot, gold)]

    def matches(self, slot: str, gold: str, predicted: str) -> bool:
        """Whether ``predicted`` is an acceptable value for ``gold`` under this policy."""
        return self.normalize(slot, predicted) in self.alternatives_of(slot, gold)

    def prepare(
        self,
        gold_states: Sequence[State],
        pred_states: Sequence[State],
        *,
        none_values: Iterable[str] = ("none",),
        keep_none: bool = False,
    ) -> tuple[list[State], list[State]]:
        """Rewrite one dialogue's states so that equality means "matches under this policy".

        Values are normalised; ``none`` values are dropped unless ``keep_none``. A gold value
        with alternatives is resolved to the prediction's value when that is acceptable, else to
        the value chosen at the previous turn when still acceptable (so an unchanged gold value
        does not look changed), else to its first alternative.
        """
        nones = frozenset(none_values)
        norm: Callable[[str, str], str] = self.normalize
        out_gold: list[State] = []
        out_pred: list[State] = []
        previous: State = {}
        identity = self.is_identity
        for gold, pred in zip(gold_states, pred_states, strict=True):
            if identity:
                p = {s: v for s, v in pred.items() if keep_none or v not in nones}
            else:
                p = {s: norm(s, v) for s, v in pred.items() if keep_none or v not in nones}
            g: State = {}
            for slot, value in gold.items():
                if value in nones and not keep_none:
                    continue
                if self.alternatives and self.separator in value:
                    options = self.alternatives_of(slot, value)
                    if p.get(slot) in options:
                        g[slot] = p[slot]
                    elif previous.get(slot) in options:
                        g[slot] = previous[slot]
                    else:
                        g[slot] = options[0]
                else:
                    g[slot] = value if identity else norm(slot, value)
            out_gold.append(g)
            out_pred.append(p)
            previous = g
        return out_gold, out_pred


def parse_policy(spec: str, *, time_slots: Iterable[str] = (), separator: str = "|") -> MatchPolicy:
    """Parse ``exact``, ``nospace``, ``normalized``, ``alternatives`` or a ``+`` combination."""
    parts = [p.strip().lower() for p in spec.split("+") if p.strip()]
    unknown = [p for p in parts if p not in POLICY_NAMES]
    if not parts or unknown:
        raise OptionError(
            f"unknown matching policy {spec!r}; choose from {', '.join(POLICY_NAMES)} "
            "(combine with '+', e.g. normalized+alternatives)")
    steps = tuple(p for p in ("normalized", "nospace") if p in parts)
    return MatchPolicy(name="+".join(parts), alternatives="alternatives" in parts,
                       separator=separator, steps=steps, time_slots=frozenset(time_slots))
