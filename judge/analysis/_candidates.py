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

import csv
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DataMismatchError, OptionError
from .._io import open_output, plain_suffix
from ..data import (
    Dialogue,
    DialogueSet,
    PredictionSet,
    Schema,
    State,
    apply_turn_state,
    dialogue_key,
    turn_state,
)
from ..metrics import normalize_time
from ..pipeline import Run

DONTCARE = "dontcare"
NONE_VALUE = "none"

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

_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_NO_PREFERENCE = re.compile(
    r"\b(?:(?:do|does|did) ?n[o']?t (?:care|matter|mind)|dont (?:care|mind)|"
    r"no (?:particular )?preference|not (?:really )?(?:particular|picky|fussy)|"
    r"(?:does|do) not matter|doesn t matter|don t (?:care|mind)|any(?:thing|where| is fine| "
    r"will do| (?:area|type|price|part|day|time|star|one))|either (?:is|one|way)|"
    r"whatever|no preferences?)\b")


# --------------------------------------------------------------------------- inputs


@dataclass
class JudgeTurn:
    """What one judge run said about one turn: verdict and the slots it flagged."""

    verdict: bool | None
    incorrect: frozenset[str]
    missed: dict[str, str | None]
    """Missed slot → the value the judge named for it (from the filter trace), if any."""
    explanations: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    """Slot → the filter trace's reason for the judge's decision on it."""
    correct: dict[str, str] | None = None
    """The state the judge holds correct after the turn, when the run records it."""

    def accepts(self, slot: str, value: str) -> bool:
        """Whether the judge let the predicted ``slot = value`` stand: it is in the judge's
        correct state (so neither flagged nor dropped by a rule filter); for runs that do not
        record that state, whether the judge did not flag the slot."""
        if self.correct is not None:
            return self.correct.get(slot) == value
        return slot not in self.incorrect


@dataclass
class AuditSource:
    """One system's predictions for the audit: cumulative predicted states per dialogue, and
    the judge's view of each turn when the source is a judge run."""

    name: str
    states: dict[str, list[State]]
    """dialogue key → predicted cumulative state after each turn"""
    judged: dict[tuple[str, int], JudgeTurn] | None = None
    path: str = ""

    @property
    def is_run(self) -> bool:
        return self.judged is not None


def source_from_predictions(predictions: PredictionSet) -> AuditSource:
    """An audit source from a predictions file (exact-match evidence only; no judge)."""
    states = {key: [dict(turn.pred_state or {}) for turn in pred.turns]
              for key, pred in predictions.dialogues.items()}
    return AuditSource(predictions.name, states, None, predictions.path)


def _judge_turn(row: Mapping[str, Any]) -> JudgeTurn:
    named: dict[str, str | None] = {}
    reasons: dict[str, str] = {}
    for step in row.get("trace") or []:
        if step.get("slot") and step.get("reason"):
            reasons[str(step["slot"])] = str(step["reason"])
        if step.get("step") == "completeness" and step.get("slot"):
            value = step.get("value")
            named[str(step["slot"])] = None if value is None else str(value)
    missed = {str(slot): named.get(str(slot)) for slot in row.get("missed") or []}
    explanations = tuple(str(c["explanation"]) for c in row.get("calls") or []
                         if c.get("explanation"))
    verdict = row.get("verdict")
    state = row.get("state")
    correct = state.get("correct") if isinstance(state, dict) else None
    return JudgeTurn(verdict if isinstance(verdict, bool) else None,
                     frozenset(str(s) for s in row.get("incorrect") or []), missed,
                     explanations, reasons,
                     {str(k): str(v) for k, v in correct.items()}
                     if isinstance(correct, dict) else None)


def source_from_run(run: Run, name: str | None = None) -> AuditSource:
    """An audit source from a judge run: the judged turn states, integrated into cumulative
    states (``none`` deletes), and the judge's verdicts and flagged slots per turn."""
    by_dialogue: dict[str, list[Mapping[str, Any]]] = {}
    for run_row in run.rows:
        by_dialogue.setdefault(dialogue_key(str(run_row["dialogue_id"])), []).append(run_row)
    states: dict[str, list[State]] = {}
    judged: dict[tuple[str, int], JudgeTurn] = {}
    for key, rows in by_dialogue.items():
        rows = sorted(rows, key=lambda r: int(r["turn_index"]))
        if [int(r["turn_index"]) for r in rows] != list(range(len(rows))):
            raise DataMismatchError(f"run {run.path}: dialogue {rows[0]['dialogue_id']!r} "
                                    "does not hold consecutive turns from 0")
        state: State = {}
        states[key] = []
        for row in rows:
            state = apply_turn_state(state, dict(row.get("pred_turn_state") or {}))
            states[key].append(state)
            judged[(key, int(row["turn_index"]))] = _judge_turn(row)
    label = name or str((run.summary.get("data") or {}).get("system") or run.path.name)
    return AuditSource(label, states, judged, str(run.path))


# --------------------------------------------------------------------------- values


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def squeeze(value: str) -> str:
    """A value without case, articles, spacing or punctuation, times as ``HH:MM`` digits:
    ``the Gonville hotel`` = ``gonvillehotel``, ``guesthouse`` = ``guest house``."""
    text = _ARTICLE.sub("", normalize_time(_words(value)))
    return _NON_ALNUM.sub("", text)


def _alternatives(value: str, separator: str) -> list[str]:
    return value.split(separator) if separator and separator in value else [value]


def _equal(predicted: str | None, gold: str | None, separator: str) -> bool:
    """Equal as the strictest RULE sees it: identical, or one of the gold alternatives."""
    if predicted is None or gold is None:
        return predicted is gold
    return predicted == gold or predicted in _alternatives(gold, separator)


def mentioned(value: str, text: str) -> bool:
    """Whether ``value`` is said in ``text``: as whole words (ignoring case, spacing and a
    leading article), or, for values of five characters or more, with spaces or punctuation
    squeezed out (``pizza hut fenditton`` in ``pizza hut fen ditton``), still as whole words."""
    base = _words(value)
    if base in (DONTCARE, NONE_VALUE, ""):
        return False
    words = _words(text)
    for candidate in {base, _ARTICLE.sub("", base)}:
        if candidate and re.search(r"(?<!\w)" + re.escape(candidate) + r"(?!\w)", words):
            return True
    short = squeeze(value)
    if len(short) < 5:
        return False
    loose = r"[\s'\-:.]?".join(re.escape(char) for char in short)
    return re.search(r"(?<![0-9a-z])" + loose + r"(?![0-9a-z])", words) is not None


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
            if _equal(value, t.gold_state(later).get(slot), self.separator):
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
                      and (j.missed[slot] is None or _equal(j.missed[slot], gold,
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
                if not _equal(value, gold, separator):
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


# --------------------------------------------------------------------------- writing


CSV_FIELDS: tuple[str, ...] = (
    "id", "rank", "score", "dialogue_id", "turn_index", "slot", "gold_version", "gold_value",
    "predicted", "systems", "predictions", "evidence", "other_versions")
REVIEW_FIELDS: tuple[str, ...] = ("context", "later", "decision", "value", "note")
"""Columns a file written with the dialogues adds: the dialogue up to the candidate's turn,
the user's words in the later turns a fix carries to, and the reviewer's (empty)
``decision`` (accept, reject or edit), ``value`` (an edit's value) and ``note``, which
``dst-judge corrections from-candidates`` reads back."""

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run: text starting with ``= + - @``, a tab or a
    carriage return gets a leading apostrophe (numbers stay numbers; none are negative)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def context(candidate: Candidate, dialogues: DialogueSet | None) -> list[dict[str, Any]]:
    """The dialogue up to and including the candidate's turn, as a reviewer reads it."""
    dialogue = dialogues.get(candidate.dialogue_id) if dialogues is not None else None
    if dialogue is None:
        return []
    return [{"turn_index": t.turn_index, "system": t.system, "user": t.user}
            for t in dialogue.turns[:candidate.turn_index + 1]]


def later_turns(candidate: Candidate, dialogues: DialogueSet | None) -> list[dict[str, Any]]:
    """The turns after the candidate's that a fix carries to (the annotation keeps the same
    value of the slot there), with what the user says in each."""
    dialogue = dialogues.get(candidate.dialogue_id) if dialogues is not None else None
    if dialogue is None or candidate.gold_version not in dialogue.turns[0].gold_states:
        return []
    version = candidate.gold_version
    wrong = dialogue.turns[candidate.turn_index].gold_states[version].get(candidate.slot)
    out = []
    for turn in dialogue.turns[candidate.turn_index + 1:]:
        if turn.gold_states[version].get(candidate.slot) != wrong:
            break
        out.append({"turn_index": turn.turn_index, "user": turn.user})
    return out


def _context_text(turns: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for turn in turns:
        if turn["system"]:
            lines.append(f"{turn['turn_index']} system: {turn['system']}")
        lines.append(f"{turn['turn_index']} user: {turn['user']}")
    return "\n".join(lines)


def _csv_row(candidate: Candidate, dialogues: DialogueSet | None = None) -> dict[str, Any]:
    record = candidate.record()
    record["gold_value"] = "" if record["gold_value"] is None else record["gold_value"]
    record["predicted"] = "" if record["predicted"] is None else record["predicted"]
    record["systems"] = "; ".join(record["systems"])
    record["predictions"] = "; ".join(f"{k}={'' if v is None else v}"
                                      for k, v in record["predictions"].items())
    record["evidence"] = "; ".join(e.detail for e in candidate.evidence if e.code != "prior")
    record["other_versions"] = "; ".join(f"{k}={'' if v is None else v}"
                                         for k, v in record["other_versions"].items())
    fields = CSV_FIELDS
    if dialogues is not None:
        record.update(context=_context_text(context(candidate, dialogues)),
                      later="\n".join(f"{t['turn_index']} user: {t['user']}"
                                      for t in later_turns(candidate, dialogues)),
                      decision="", value="", note="")
        fields = (*CSV_FIELDS, *REVIEW_FIELDS)
    return {name: csv_cell(record[name]) for name in fields}


def write_candidates(candidates: Sequence[Candidate], path: str | Path,
                     dialogues: DialogueSet | None = None) -> int:
    """Write ranked candidates as CSV (``.csv``, ``.csv.gz``) or JSON Lines (anything else,
    gzip under a ``.gz`` name); returns the number written. CSV cells are escaped against
    formula injection.

    With ``dialogues`` each candidate also carries its ``context`` (the dialogue up to its
    turn) and empty ``decision``/``value``/``note`` to fill in: the file is then a review
    sheet that ``dst-judge corrections from-candidates`` turns into corrections."""
    if plain_suffix(path) == ".csv":
        fields = (*CSV_FIELDS, *REVIEW_FIELDS) if dialogues is not None else CSV_FIELDS
        with open_output(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(fields))
            writer.writeheader()
            for candidate in candidates:
                writer.writerow(_csv_row(candidate, dialogues))
    else:
        with open_output(path) as handle:
            for candidate in candidates:
                record = candidate.record()
                if dialogues is not None:
                    record.update(context=context(candidate, dialogues),
                                  later=later_turns(candidate, dialogues), decision=None,
                                  value=None, note=None)
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return len(candidates)


# --------------------------------------------------------------------------- reading inputs


@dataclass
class AuditInputs:
    """What an audit reads: the dialogues (gold and text), the schema when known, one source
    per input, and the judge runs among the inputs."""

    dialogues: DialogueSet
    schema: Schema | None
    sources: list[AuditSource]
    runs: list[Run]


DOWNLOADED_INPUTS = "inputs.json"
"""What ``dst-judge results --out`` writes next to a service job's results: kind → path of
the job's input file (a copy it downloaded), relative to the run directory."""


def _downloaded(run: Run, name: str) -> Path | None:
    """The copy of an input file that ``dst-judge results`` fetched with the run, if any."""
    try:
        pointer = json.loads((run.path / DOWNLOADED_INPUTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    relative = pointer.get(name) if isinstance(pointer, dict) else None
    if not isinstance(relative, str):
        return None
    found = (run.path / relative).resolve()
    inside = found.is_relative_to(run.path.resolve())  # a pointer never leaves the run
    return found if inside and found.is_file() else None


def recorded_input(run: Run, name: str) -> Path | None:
    """A data file a judge run recorded (its manifest, else the copy ``dst-judge results``
    downloaded, else its summary), if it still exists."""
    downloaded = _downloaded(run, name)
    manifest_path = run.path / "manifest.json"
    recorded: Any = None
    if manifest_path.is_file():
        try:
            recorded = (json.loads(manifest_path.read_text(encoding="utf-8"))
                        .get("sources") or {}).get(name)
        except (OSError, ValueError, AttributeError):
            recorded = None
    if recorded is None and downloaded is not None:
        return downloaded
    if recorded is None:
        recorded = (run.summary.get("data") or {}).get(name)
    if isinstance(recorded, str) and Path(recorded).is_file():
        return Path(recorded)
    return downloaded


def _unique_names(sources: list[AuditSource]) -> None:
    """Give every source its own name: the system name, else the file name, else numbered."""
    counts: dict[str, int] = {}
    for source in sources:
        counts[source.name] = counts.get(source.name, 0) + 1
    taken: set[str] = set()
    for position, source in enumerate(sources, start=1):
        if counts[source.name] > 1:
            stem = Path(source.path).name or source.name
            source.name = stem if stem not in taken else f"{stem}#{position}"
        taken.add(source.name)


def load_audit_inputs(paths: Sequence[str | Path], *, dialogues: str | Path | None = None,
                      schema: str | Path | None = None) -> AuditInputs:
    """Read the audit's inputs: each path is a judge run directory or a predictions file.

    The dialogues come from ``dialogues``, else from the file the first judge run recorded;
    the schema likewise (it is optional: without it the value-set evidence is left out).
    Plain predictions files need the dialogues to align with.
    """
    from ..data import load_dialogues, load_predictions, load_schema
    from ..pipeline import load_run

    if not paths:
        raise OptionError("the audit needs at least one run directory or predictions file")
    runs = [load_run(p) for p in paths if Path(p).is_dir()]
    dialogues_path = Path(dialogues) if dialogues else next(
        (found for run in runs if (found := recorded_input(run, "dialogues")) is not None), None)
    if dialogues_path is None:
        raise OptionError("pass --dialogues FILE: plain predictions files need it, and the "
                          "runs' recorded dialogues file is not found from here")
    schema_path = Path(schema) if schema else next(
        (found for run in runs if (found := recorded_input(run, "schema")) is not None), None)
    loaded_schema = load_schema(schema_path) if schema_path is not None else None
    dialogue_set = load_dialogues(dialogues_path)
    sources: list[AuditSource] = []
    run_iter = iter(runs)
    for path in paths:
        if Path(path).is_dir():
            sources.append(source_from_run(next(run_iter)))
        else:
            sources.append(source_from_predictions(
                load_predictions(path, dialogue_set, loaded_schema)))
    _unique_names(sources)
    return AuditInputs(dialogue_set, loaded_schema, sources, runs)
