"""Rule filters and result integration: from parsed judge responses to turn and JGA verdicts.

The judge model's answers are noisy (keys that name no slot, slots the DST model never
predicted, values the user mentioned turns ago), so each answer passes rule filters before it
counts; the survivors update per-dialogue sets of incorrect, missed and correct slots, from
which the turn verdict (TSA) and the judge's joint-goal verdict follow. Two semantics exist:
``paper`` reproduces the reference implementation's published numbers, ``default`` fixes its
known flaws (see ``METHOD.md`` section 4). Every decision is traced so verdicts can be audited.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data import Schema
from ..metrics import ratio, same_value
from ._rules import RuleSet, Semantics, canonical_key, check_semantics, check_value

KEPT = "kept"
DROPPED = "dropped"


@dataclass
class TurnInput:
    """What the judge said about one turn (dialogue order); results are parsed JSON objects.

    ``incorrect`` / ``missed``: keys as the model wrote them, any JSON values; ``{}`` means
    nothing reported; ``None`` means that call failed. ``error`` marks a failed turn.
    """

    turn_index: int
    pred_turn: dict[str, str]
    incorrect: dict[str, object] | None
    missed: dict[str, object] | None
    error: str | None = None


@dataclass
class TurnVerdict:
    """The integrated outcome of one turn plus the trace of every filter decision."""

    turn_index: int
    verdict: bool | None
    jga: bool | None
    trace: list[dict[str, Any]] = field(default_factory=list)
    incorrect: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    state_incorrect: list[str] = field(default_factory=list)
    state_missed: list[str] = field(default_factory=list)
    state_correct: dict[str, str] = field(default_factory=dict)


@dataclass
class _DialogueState:
    """Running sets of one dialogue; ``undetermined`` once a turn could not be scored."""

    incorrect: set[str] = field(default_factory=set)
    missed: set[str] = field(default_factory=set)
    correct: dict[str, str] = field(default_factory=dict)
    undetermined: bool = False

    def clean(self) -> bool | None:
        """Judge-JGA reading: no outstanding incorrect/missed slots (None if undetermined)."""
        if self.undetermined:
            return None
        return not self.incorrect and not self.missed


def _entry(step: str, key: str | None, slot: str | None, value: Any, decision: str,
           reason: str) -> dict[str, Any]:
    return {"step": step, "key": key, "slot": slot, "value": value, "decision": decision,
            "reason": reason}


def _is_blank(value: object) -> bool:
    """Whether a missed value carries no information (``""``, ``none``, null, empty list)."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip().lower() in ("", "none")
    if isinstance(value, (list, tuple, dict)):
        return len(value) == 0
    return False


def _as_text(value: object, separator: str) -> str:
    """A model value as comparable text: numbers as written, lists joined by the separator."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return separator.join(_as_text(v, separator) for v in value)
    return str(value)


def _lowercase(value: object) -> object:
    """The reference implementation lowercased the whole completeness response."""
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [_lowercase(v) for v in value]
    if isinstance(value, dict):
        return {str(k).lower(): _lowercase(v) for k, v in value.items()}
    return value


class _Integrator:
    """Applies the filters of one semantics to the turns of one dialogue."""

    def __init__(self, schema: Schema, rules: RuleSet, semantics: Semantics) -> None:
        self.schema = schema
        self.rules = rules
        self.paper = semantics == "paper"
        self.semantics = semantics
        self.state = _DialogueState()

    # -- slot identity ------------------------------------------------------------------------

    def slot_of(self, key: str) -> str | None:
        """The schema slot a key names under this semantics (paper: verbatim names only)."""
        if self.paper:
            return key if key in self.schema.slots else None
        return canonical_key(key, self.schema, self.rules)

    def same_value(self, slot: str, left: str, right: str) -> bool:
        """One value written two ways? The metrics' value matching (``Saint John's College`` =
        ``saint john s college``), used only under default semantics."""
        return same_value(slot, left, right, self.schema.time_slots)

    def snapshot(self, verdict: TurnVerdict) -> TurnVerdict:
        verdict.state_incorrect = sorted(self.state.incorrect)
        verdict.state_missed = sorted(self.state.missed)
        verdict.state_correct = dict(sorted(self.state.correct.items()))
        return verdict

    # -- one turn -----------------------------------------------------------------------------

    def turn(self, item: TurnInput) -> TurnVerdict:
        before = self.state.clean()
        incorrect = item.incorrect
        if incorrect is None and not item.pred_turn and item.error is None:
            incorrect = {}  # accuracy is never asked about an empty turn state
        if item.error is not None:
            return self.error_turn(item, item.error, before)
        if incorrect is None:
            return self.error_turn(item, "accuracy result missing", before)
        if item.missed is None:
            return self.error_turn(item, "completeness result missing", before)

        trace: list[dict[str, Any]] = []
        # Predicted pairs as (written slot, schema slot or None, value).
        pairs = [(raw, self.slot_of(raw), value) for raw, value in item.pred_turn.items()]
        predicted = {slot if slot is not None else raw for raw, slot, _ in pairs}

        turn_incorrect = self.accuracy(incorrect, predicted, trace)
        turn_missed = self.completeness(item.missed, predicted, trace)
        self.state.incorrect |= turn_incorrect
        self.state.missed |= turn_missed

        verdict = not turn_incorrect and not turn_missed
        for raw, slot, value in pairs:
            verdict = self.prediction(raw, slot, value, turn_incorrect, trace) and verdict

        jga = before if self.paper else self.state.clean()
        result = TurnVerdict(turn_index=item.turn_index, verdict=verdict, jga=jga, trace=trace,
                             incorrect=sorted(turn_incorrect), missed=sorted(turn_missed))
        return self.snapshot(result)

    def error_turn(self, item: TurnInput, reason: str, before: bool | None) -> TurnVerdict:
        """A turn that cannot be scored: sets unchanged, JGA undetermined from here on."""
        self.state.undetermined = True
        trace = [_entry("error", None, None, None, DROPPED, f"turn not scored: {reason}")]
        jga = before if self.paper else None
        return self.snapshot(TurnVerdict(turn_index=item.turn_index, verdict=None, jga=jga,
                                         trace=trace))

    def accuracy(self, result: dict[str, object], predicted: set[str],
                 trace: list[dict[str, Any]]) -> set[str]:
        """Filter 1: an incorrect key counts only for a slot the turn state predicts."""
        kept: set[str] = set()
        for key, value in result.items():
            if self.paper:
                slot: str | None = key  # compared verbatim, case-sensitive
            else:
                slot = canonical_key(key, self.schema, self.rules)
                if slot is None:
                    trace.append(_entry("accuracy", key, None, value, DROPPED,
                                        "key names no schema slot"))
                    continue
            if slot not in predicted:
                trace.append(_entry("accuracy", key, slot, value, DROPPED,
                                    "slot is not in the predicted turn state"))
                continue
            kept.add(slot)
            trace.append(_entry("accuracy", key, slot, value, KEPT,
                                "predicted pair judged incorrect"))
        return kept

    def completeness(self, result: dict[str, object], predicted: set[str],
                     trace: list[dict[str, Any]]) -> set[str]:
        """Filter 2: a missed key counts only for a schema slot neither predicted nor settled."""
        if self.paper:
            result = {key.lower(): _lowercase(value) for key, value in result.items()}
        kept: set[str] = set()
        for key, value in result.items():
            slot = self.slot_of(key)
            reason = self.missed_drop_reason(slot, value, predicted)
            if reason is not None:
                trace.append(_entry("completeness", key, slot, value, DROPPED, reason))
                continue
            assert slot is not None
            kept.add(slot)
            why = "user value missing from the predicted turn state"
            if slot in self.state.correct:
                why = (f"user changed {slot} from the correct value "
                       f"{self.state.correct[slot]!r}")
            trace.append(_entry("completeness", key, slot, value, KEPT, why))
        return kept

    def missed_drop_reason(self, slot: str | None, value: object,
                           predicted: set[str]) -> str | None:
        if slot is None:
            return "key names no schema slot"
        if not self.paper and _is_blank(value):
            return "missed value is empty, 'none' or null"
        if slot in predicted:
            return "slot is in the predicted turn state"
        if slot not in self.state.correct:
            return None
        earlier = self.state.correct[slot]
        if self.paper:
            return f"slot already judged correct (value {earlier!r})"
        if self.same_value(slot, _as_text(value, self.schema.multi_value_separator), earlier):
            return f"slot already judged correct with the same value {earlier!r}"
        return None

    def prediction(self, raw: str, slot: str | None, value: str, flagged: set[str],
                   trace: list[dict[str, Any]]) -> bool:
        """Filter 3 for one predicted pair; returns False when it makes the turn incorrect."""
        if slot is None:
            self.state.incorrect.add(raw)
            trace.append(_entry("prediction", raw, None, value, DROPPED,
                                "predicted slot is not in the schema"))
            return False
        earlier = self.state.correct.get(slot)
        if earlier is not None and (earlier == value if self.paper
                                    else self.same_value(slot, earlier, value)):
            trace.append(_entry("prediction", raw, slot, value, DROPPED,
                                "redundant: repeats a pair already judged correct"))
            return False
        broken = check_value(slot, value, self.rules, self.schema, self.semantics)
        if broken is not None:
            trace.append(_entry("prediction", raw, slot, value, DROPPED,
                                f"value rule: {broken}"))
            return False
        if slot in self.state.incorrect:
            if self.paper or slot in flagged:
                trace.append(_entry("prediction", raw, slot, value, DROPPED,
                                    "slot is outstanding as incorrect"))
                return True
            self.state.incorrect.discard(slot)
            reason = "passes every check; clears the slot's earlier incorrect verdict"
        else:
            reason = "passes every check; recorded as correct"
        self.state.missed.discard(slot)
        self.state.correct[slot] = value
        trace.append(_entry("prediction", raw, slot, value, KEPT, reason))
        return True


def integrate_dialogue(turns: Sequence[TurnInput], schema: Schema, rules: RuleSet,
                       semantics: Semantics) -> list[TurnVerdict]:
    """Filter and integrate one dialogue's judge results into per-turn verdicts."""
    integrator = _Integrator(schema, rules, check_semantics(semantics))
    return [integrator.turn(item) for item in turns]


@dataclass
class Totals:
    """Run-level figures; percentages (×100), None when no turn could be scored."""

    turns: int
    scored: int
    errors: int
    tsa: float | None
    jga_turns: int
    judge_jga: float | None


def totals(verdicts: Iterable[TurnVerdict]) -> Totals:
    """TSA over scored turns and judge JGA over turns with a determined JGA reading."""
    items = list(verdicts)
    scored = [v.verdict for v in items if v.verdict is not None]
    readings = [v.jga for v in items if v.jga is not None]
    return Totals(turns=len(items), scored=len(scored), errors=len(items) - len(scored),
                  tsa=ratio(sum(scored), len(scored)), jga_turns=len(readings),
                  judge_jga=ratio(sum(readings), len(readings)))


def agreement(judge: Sequence[bool | None], rule: Sequence[bool]) -> float | None:
    """Percent of turns with a judge verdict on which judge and RULE verdicts agree."""
    pairs = [(j, r) for j, r in zip(judge, rule, strict=True) if j is not None]
    return ratio(sum(j == r for j, r in pairs), len(pairs))
