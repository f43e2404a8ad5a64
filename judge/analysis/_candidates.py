"""Ranked label-error candidates: the (turn, slot) pairs where the audited gold annotation is
most likely wrong, with the evidence for each.

Listing every turn where a prediction differs from the gold is a poor finder of annotation
errors: most differences are prediction errors. What singles out a gold error is evidence that
does not depend on the gold itself: several systems (or runs) agreeing on the same value
against it, the gold recording the systems' value only at a later turn, a gold value outside
the schema's value set while the systems' value is inside it, the systems' value appearing in
the dialogue while the gold's does not, an explicit "no preference" the gold missed, and, for
judge runs, the judge accepting what the gold rejects (or not missing what the gold adds).
Each piece of evidence adds a fixed weight to a log-odds score; the sum is mapped to (0, 1)
by the logistic function. The weights were set by hand from what each kind of evidence means,
then checked on MultiWOZ 2.1 against the 2.4 corrections (``bench/audit_candidates.py``);
the score ranks, it is not a calibrated probability.

Candidates come one per dialogue, slot and value, at the first turn where the disagreement
shows, not again at every later turn that carries it. Only the audited version is evidence:
another annotation version (say 2.4 when auditing 2.1) is shown beside a candidate but never
scores it, so the audit of 2.1 does not peek at its own answer key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import DataMismatchError, OptionError
from ..data import Dialogue, DialogueSet, Schema, State, dialogue_key, turn_state
from ._audit_inputs import AuditSource, JudgeTurn
from ._values import DONTCARE, in_schema, mentioned, rule_equal, squeeze
from ._values import alternatives as _alternatives
from ._values import words as _words

#: Weight of each kind of evidence on the log-odds scale (see the module docstring).
WEIGHTS: dict[str, float] = {
    "prior": -1.0,
    "systems_agree": 2.0,        # × (k − 1)/(K − 1): all K systems hold the value
    "systems_split": -0.5,       # another system holds a third value
    "gold_later": 3.0,           # the gold records this value only at a later turn
    "gold_outside_schema": 3.0,  # the gold's value is outside the slot's value set / format
    "value_outside_schema": -3.0,  # the systems' value is outside it
    "gold_omits": 1.0,           # the systems set a slot the gold leaves empty
    "value_in_dialogue": 0.5,    # the systems' value is said in the dialogue ...
    "gold_not_in_dialogue": 1.0,  # ... and the gold's value is not
    "gold_in_dialogue": -0.5,    # the gold's value is said, the systems' is not
    "said_no_preference": 1.5,   # the user says "no preference" and the systems put dontcare
    "gold_dontcare": -1.5,       # the gold's dontcare is what systems most often miss
    "surface_variant": -2.5,     # the values differ only in spelling
    "judge_accepts": 1.0,        # × share of judge runs accepting the systems' value
    "judge_rejects": -1.5,       # × share of judge runs flagging it
    "judge_misses_gold": -1.5,   # a judge names the gold's value as missed by the prediction
}

_NO_PREFERENCE = re.compile(
    r"\b(?:(?:do|does|did) ?n[o']?t (?:care|matter|mind)|dont (?:care|mind)|"
    r"no (?:particular )?preference|not (?:really )?(?:particular|picky|fussy)|"
    r"(?:does|do) not matter|doesn t matter|don t (?:care|mind)|any(?:thing|where| is fine| "
    r"will do| (?:area|type|price|part|day|time|star|one))|either (?:is|one|way)|"
    r"whatever|no preferences?)\b")


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Evidence:
    """One reason to suspect (or to trust) the gold, with its weight on the log-odds scale."""

    code: str
    weight: float
    detail: str


@dataclass
class Candidate:
    """A (turn, slot) where the audited gold annotation is suspect."""

    dialogue_id: str
    turn_index: int
    slot: str
    gold_version: str
    gold_value: str | None
    """The audited gold's value of the slot after this turn (None: not set)."""
    predicted: str | None
    """The value the systems propose instead (None: the slot should not be set)."""
    systems: list[str]
    """Sources whose prediction holds ``predicted`` at this turn."""
    predictions: dict[str, str | None]
    """Every source's predicted value of the slot at this turn."""
    evidence: list[Evidence]
    other_versions: dict[str, str | None] = field(default_factory=dict)
    """Other annotation versions' values, shown beside; never used in the score."""
    rank: int = 0

    @property
    def id(self) -> str:
        """The candidate's id (:func:`candidate_id`), the same in every file and queue."""
        return candidate_id(self.dialogue_id, self.turn_index, self.slot)

    @property
    def logit(self) -> float:
        return sum(e.weight for e in self.evidence)

    @property
    def score(self) -> float:
        """The evidence mapped to (0, 1); higher = more likely a gold error."""
        return 1.0 / (1.0 + math.exp(-self.logit))

    def record(self) -> dict[str, Any]:
        """The candidate as one JSON Lines record."""
        return {
            "id": self.id, "rank": self.rank, "score": round(self.score, 6),
            "dialogue_id": self.dialogue_id,
            "turn_index": self.turn_index, "slot": self.slot, "gold_version": self.gold_version,
            "gold_value": self.gold_value, "predicted": self.predicted,
            "systems": list(self.systems), "predictions": dict(self.predictions),
            "evidence": [{"code": e.code, "weight": e.weight, "detail": e.detail}
                         for e in self.evidence],
            "other_versions": dict(self.other_versions),
        }


def candidate_id(dialogue_id: str, turn_index: int, slot: str) -> str:
    """A candidate's id, ``dialogue:turn:slot`` (``PMUL0117.json:4:hotel-area``): stable across
    audits of the same data, and the same in the candidates file, the web queue, its decisions
    and the corrections made of them. It names the question (the slot's value after that
    turn), so two systems' competing proposals for one slot share it: one decision answers
    both."""
    return f"{dialogue_id}:{turn_index}:{slot}"


def base_version(name: str) -> str:
    """The annotation version a corrected version was made from (``2.1+corr:1a2b`` → ``2.1``):
    what a correction found on a corrected gold must name to apply to the dialogues file."""
    return name.split("+corr:")[0]


def drop_decided(candidates: Sequence[Candidate], decided: Iterable[tuple[str, int, str]]
                 ) -> tuple[list[Candidate], int]:
    """The candidates without those already decided, ranks renumbered, and how many were
    left out. ``decided`` holds (dialogue key, turn, slot) of every turn a correction covers,
    a rejection ("the annotation is right") as much as an accepted or edited value: a re-audit
    over the corrected gold would otherwise list them again, at the top."""
    done = set(decided)
    kept = [c for c in candidates
            if (dialogue_key(c.dialogue_id), c.turn_index, c.slot) not in done]
    for rank, candidate in enumerate(kept, start=1):
        candidate.rank = rank
    return kept, len(candidates) - len(kept)


def _show(value: str | None) -> str:
    return "(absent)" if value is None else repr(value)


@dataclass
class _Turn:
    """What the evidence rules see of one turn of one dialogue."""

    dialogue: Dialogue
    index: int
    gold: str
    states: dict[str, State]
    """source name → predicted cumulative state"""
    changed: dict[str, State]
    """source name → slots whose predicted value changed at this turn"""
    judged: dict[str, JudgeTurn | None]
    text: str
    """everything said up to and including this turn"""

    @property
    def turn(self) -> Any:
        return self.dialogue.turns[self.index]

    def gold_state(self, index: int | None = None) -> State:
        return self.dialogue.turns[self.index if index is None else index].gold_states[self.gold]


class _Scorer:
    """The evidence rules (one method each keeps the rules readable and testable)."""

    def __init__(self, schema: Schema | None, separator: str) -> None:
        self.schema = schema
        self.separator = separator

    def evidence(self, t: _Turn, slot: str, value: str | None,
                 holders: list[str]) -> list[Evidence]:
        gold = t.gold_state().get(slot)
        out = [Evidence("prior", WEIGHTS["prior"], "base rate of a disagreement")]
        for rule in (self._agreement, self._timing, self._schema, self._dialogue,
                     self._dontcare, self._spelling, self._judges):
            out.extend(rule(t, slot, value, gold, holders))
        return out

    def _agreement(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                   holders: list[str]) -> Iterable[Evidence]:
        total = len(t.states)
        if total >= 2:
            share = (len(holders) - 1) / (total - 1)
            if share > 0:
                yield Evidence("systems_agree", WEIGHTS["systems_agree"] * share,
                               f"{len(holders)} of {total} systems predict {_show(value)} "
                               f"where {t.gold} has {_show(gold)}")
            others = {s.get(slot) for name, s in t.states.items() if name not in holders}
            others.discard(gold)
            if others:
                yield Evidence("systems_split", WEIGHTS["systems_split"],
                               "other systems predict yet another value: "
                               + ", ".join(sorted(_show(v) for v in others)))
        if value is not None and gold is None:
            yield Evidence("gold_omits", WEIGHTS["gold_omits"],
                           f"{t.gold} leaves the slot empty")

    def _timing(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                holders: list[str]) -> Iterable[Evidence]:
        if value is None:
            return
        for later in range(t.index + 1, len(t.dialogue.turns)):
            if rule_equal(value, t.gold_state(later).get(slot), self.separator):
                yield Evidence("gold_later", WEIGHTS["gold_later"],
                               f"{t.gold} records {_show(value)} only from turn {later}")
                return

    def _schema(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                holders: list[str]) -> Iterable[Evidence]:
        if gold is not None and all(in_schema(self.schema, slot, g) is False
                                    for g in _alternatives(gold, self.separator)):
            yield Evidence("gold_outside_schema", WEIGHTS["gold_outside_schema"],
                           f"{t.gold}'s {_show(gold)} is outside the slot's value set or format")
        if value is not None and in_schema(self.schema, slot, value) is False:
            yield Evidence("value_outside_schema", WEIGHTS["value_outside_schema"],
                           f"{_show(value)} is outside the slot's value set or format")

    def _dialogue(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                  holders: list[str]) -> Iterable[Evidence]:
        value_said = value is not None and mentioned(value, t.text)
        gold_said = gold is not None and any(mentioned(g, t.text)
                                             for g in _alternatives(gold, self.separator))
        if value_said and not gold_said:
            yield Evidence("value_in_dialogue", WEIGHTS["value_in_dialogue"],
                           f"{_show(value)} is said in the dialogue")
        if gold is not None and gold != DONTCARE and not gold_said:
            yield Evidence("gold_not_in_dialogue", WEIGHTS["gold_not_in_dialogue"],
                           f"{t.gold}'s {_show(gold)} is not said in the dialogue so far")
        if gold_said and not value_said:
            yield Evidence("gold_in_dialogue", WEIGHTS["gold_in_dialogue"],
                           f"{t.gold}'s {_show(gold)} is said in the dialogue")

    def _dontcare(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                  holders: list[str]) -> Iterable[Evidence]:
        said = _NO_PREFERENCE.search(_words(t.turn.user)) is not None
        if value == DONTCARE and said:
            yield Evidence("said_no_preference", WEIGHTS["said_no_preference"],
                           "the user states no preference in this turn")
        if gold == DONTCARE and value is None:
            yield Evidence("gold_dontcare", WEIGHTS["gold_dontcare"],
                           f"{t.gold} says dontcare, which systems often fail to predict")

    def _spelling(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                  holders: list[str]) -> Iterable[Evidence]:
        if value is not None and gold is not None and any(
                squeeze(value) == squeeze(g) for g in _alternatives(gold, self.separator)):
            yield Evidence("surface_variant", WEIGHTS["surface_variant"],
                           f"{_show(value)} and {_show(gold)} differ only in spelling")

    def _judges(self, t: _Turn, slot: str, value: str | None, gold: str | None,
                holders: list[str]) -> Iterable[Evidence]:
        runs = [(name, j) for name, j in t.judged.items() if j is not None
                and j.verdict is not None]
        if not runs:
            return
        if value is not None:
            verdicts = [(name, j, j.accepts(slot, value)) for name, j in runs
                        if name in holders and slot in t.changed.get(name, {})]
            accepted = [(name, j) for name, j, ok in verdicts if ok]
            rejected = [(name, j) for name, j, ok in verdicts if not ok]
            if accepted:
                yield Evidence("judge_accepts", WEIGHTS["judge_accepts"] * len(accepted)
                               / len(runs), f"the judge accepts {_show(value)} "
                               f"({_because(accepted, slot)})")
            if rejected:
                yield Evidence("judge_rejects", WEIGHTS["judge_rejects"] * len(rejected)
                               / len(runs), f"the judge flags {_show(value)} as incorrect "
                               f"({_because(rejected, slot)})")
        if gold is not None:
            naming = [(name, j) for name, j in runs if name in holders and slot in j.missed
                      and (j.missed[slot] is None or rule_equal(j.missed[slot], gold,
                                                            self.separator))]
            if naming:
                yield Evidence("judge_misses_gold", WEIGHTS["judge_misses_gold"]
                               * len(naming) / len(runs),
                               f"the judge says the prediction missed {slot} "
                               f"({_because(naming, slot)})")


def _because(runs: Sequence[tuple[str, JudgeTurn]], slot: str) -> str:
    """Run names, each with the judge's slot-level reason when its trace gives one."""
    return "; ".join(f"{name}: {j.reasons[slot]}" if slot in j.reasons else name
                     for name, j in runs)


def _text_until(dialogue: Dialogue, index: int) -> str:
    return " ".join(f"{t.system} {t.user}" for t in dialogue.turns[: index + 1])


def find_candidates(dialogues: DialogueSet, sources: Sequence[AuditSource], *,
                    gold: str | None = None, schema: Schema | None = None) -> list[Candidate]:
    """Every suspected gold error of version ``gold`` (default: the file's first), one per
    dialogue, slot and proposed value at the first turn it shows, ranked by score.

    A candidate is a slot whose value after some turn differs, in at least one source, from
    the audited gold, where the gold or that source changed the slot at that turn. Slots
    outside the schema (when one is given) are prediction errors, never candidates.
    """
    if not sources:
        raise OptionError("the audit needs at least one run or predictions file")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise OptionError(f"two inputs have the same name ({', '.join(names)}); name them "
                          "apart")
    version = dialogues.resolve_version(gold)
    others = [v for v in dialogues.versions if v != version]
    separator = schema.multi_value_separator if schema is not None else "|"
    scorer = _Scorer(schema, separator)
    candidates: list[Candidate] = []
    for dialogue in dialogues.dialogues:
        key = dialogue_key(dialogue.dialogue_id)
        covering = [s for s in sources if key in s.states]
        if not covering:
            continue
        for source in covering:
            if len(source.states[key]) != len(dialogue.turns):
                raise DataMismatchError(
                    f"{source.name} has {len(source.states[key])} turns for dialogue "
                    f"{dialogue.dialogue_id!r}, the dialogues file {len(dialogue.turns)}")
        candidates.extend(_dialogue_candidates(dialogue, key, covering, version, others,
                                               schema, separator, scorer))
    candidates.sort(key=lambda c: (-c.logit, dialogues.index[dialogue_key(c.dialogue_id)],
                                   c.turn_index, c.slot))
    for rank, candidate in enumerate(candidates, start=1):
        candidate.rank = rank
    return candidates


def _dialogue_candidates(dialogue: Dialogue, key: str, sources: Sequence[AuditSource],
                         version: str, others: Sequence[str], schema: Schema | None,
                         separator: str, scorer: _Scorer) -> list[Candidate]:
    out: list[Candidate] = []
    seen: set[tuple[Any, ...]] = set()
    previous: dict[str, State] = {s.name: {} for s in sources}
    gold_previous: State = {}
    for index, turn in enumerate(dialogue.turns):
        gold_now = turn.gold_states[version]
        states = {s.name: s.states[key][index] for s in sources}
        changed = {name: turn_state(previous[name], state, include_removals=True)
                   for name, state in states.items()}
        gold_changed = turn_state(gold_previous, gold_now, include_removals=True)
        view = _Turn(dialogue, index, version, states, changed,
                     {s.name: (s.judged or {}).get((key, index)) if s.is_run else None
                      for s in sources}, _text_until(dialogue, index))
        slots = dict.fromkeys([*gold_changed, *(s for c in changed.values() for s in c)])
        for slot in slots:
            if schema is not None and slot not in schema.slots:
                continue
            gold = gold_now.get(slot)
            proposals: dict[str | None, list[str]] = {}
            for name, state in states.items():
                value = state.get(slot)
                if not rule_equal(value, gold, separator):
                    proposals.setdefault(value, []).append(name)
            for value, holders in proposals.items():
                if slot not in gold_changed and not any(slot in changed[n] for n in holders):
                    continue  # an old disagreement carried along, shown where it began
                mark = (slot, value) if value is not None else (slot, None, gold)
                if mark in seen:
                    continue
                seen.add(mark)
                out.append(Candidate(
                    dialogue_id=dialogue.dialogue_id, turn_index=index, slot=slot,
                    gold_version=version, gold_value=gold, predicted=value,
                    systems=holders, predictions={n: s.get(slot) for n, s in states.items()},
                    evidence=scorer.evidence(view, slot, value, holders),
                    other_versions={v: turn.gold_states[v].get(slot) for v in others}))
        previous = states
        gold_previous = gold_now
    return out
