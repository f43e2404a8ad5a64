"""Dialogues, predictions and human-readable loading errors.

File formats (JSON Lines, optionally gzipped, one dialogue per line) follow the layout of
``shared/data/multiwoz``; see the README's *File formats* section. Gold states per annotation
version are read from ``gold_state_<tag>`` keys (``gold_state_21`` → version ``2.1``); a bare
``gold_state`` is the single version ``gold``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._errors import DataMismatchError, InputError, OptionError
from .._io import iter_jsonl_lines, parse_line
from ._schema import Schema
from ._states import NONE, State, apply_turn_state

_GOLD_KEY = re.compile(r"^gold_(turn_)?state(?:_(.+))?$")
DEFAULT_VERSION = "gold"


def version_label(tag: str | None) -> str:
    """Annotation version named by a key suffix: ``21`` → ``2.1``; none → ``gold``."""
    if not tag:
        return DEFAULT_VERSION
    if tag.isdigit() and len(tag) >= 2:
        return f"{tag[0]}.{tag[1:]}"
    return tag


def dialogue_key(dialogue_id: str) -> str:
    """Join key for dialogue ids: ``SNG0073.json``, ``SNG0073`` and ``sng0073`` are one id."""
    key = dialogue_id.strip().lower()
    return key[: -len(".json")] if key.endswith(".json") else key


class Turn(BaseModel):
    """One turn: the system utterance, the user's reply and gold states per version."""

    model_config = ConfigDict(extra="allow")

    turn_index: int = Field(ge=0)
    system: str = ""
    user: str = ""
    gold_states: dict[str, State] = Field(default_factory=dict)
    gold_turn_states: dict[str, State] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect_gold(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        states: dict[str, Any] = dict(data.get("gold_states") or {})
        turn_states: dict[str, Any] = dict(data.get("gold_turn_states") or {})
        rest: dict[str, Any] = {}
        for key, value in data.items():
            match = _GOLD_KEY.match(key)
            if match is None or key in ("gold_states", "gold_turn_states"):
                rest[key] = value
            elif match.group(1):
                turn_states[version_label(match.group(2))] = value
            else:
                states[version_label(match.group(2))] = value
        rest["gold_states"] = states
        rest["gold_turn_states"] = turn_states
        return rest


class Dialogue(BaseModel):
    """A dialogue with its turns in order."""

    model_config = ConfigDict(extra="allow")

    dialogue_id: str = Field(min_length=1)
    domains: list[str] = Field(default_factory=list)
    turns: list[Turn] = Field(min_length=1)

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(self.turns[0].gold_states)


Hypotheses = list[tuple[str, float]]


class PredTurn(BaseModel):
    """A DST system's output for one turn."""

    model_config = ConfigDict(extra="allow")

    turn_index: int = Field(ge=0)
    pred_state: State | None = None
    pred_turn_state: State | None = None
    pred_turn_raw: list[tuple[str, str]] | None = None
    pred_hyps: dict[str, Hypotheses] | None = Field(
        default=None, description="Scored N-best list per slot: [[value, score], ...]."
    )
    pred_joint_hyps: list[tuple[State, float]] | None = Field(
        default=None, description="Scored N-best list of whole states: [[state, score], ...]."
    )


class PredDialogue(BaseModel):
    """A DST system's outputs for one dialogue."""

    model_config = ConfigDict(extra="allow")

    dialogue_id: str = Field(min_length=1)
    system_name: str | None = None
    turns: list[PredTurn] = Field(min_length=1)


@dataclass
class DialogueSet:
    """The dialogues of one file, in file order, with the annotation versions they carry."""

    path: str
    dialogues: list[Dialogue]
    versions: tuple[str, ...]
    index: dict[str, int] = field(repr=False)
    excluded: frozenset[str] = field(default=frozenset(), repr=False)
    """Keys of dialogues the file has but a subset left out (their predictions are skipped)."""

    def __len__(self) -> int:
        return len(self.dialogues)

    @property
    def num_turns(self) -> int:
        return sum(len(d.turns) for d in self.dialogues)

    def get(self, dialogue_id: str) -> Dialogue | None:
        position = self.index.get(dialogue_key(dialogue_id))
        return None if position is None else self.dialogues[position]

    def resolve_version(self, requested: str | None) -> str:
        """Pick an annotation version: the one asked for (``2.1`` or ``21``), else the first."""
        if not self.versions:
            raise OptionError(f"{self.path}: the dialogues carry no gold states")
        if requested is None:
            return self.versions[0]
        wanted = requested.replace(".", "").lower()
        for version in self.versions:
            if version.replace(".", "").lower() == wanted:
                return version
        raise OptionError(
            f"{self.path}: unknown annotation version {requested!r}; "
            f"the file has: {', '.join(self.versions)}"
        )

    def subset(self, dialogue_ids: Iterable[str], *, source: str = "") -> DialogueSet:
        """Keep only the given dialogues (in the order given); unknown ids are an error."""
        keep: list[Dialogue] = []
        for dialogue_id in dialogue_ids:
            found = self.get(dialogue_id)
            if found is None:
                raise DataMismatchError(f"dialogue id {dialogue_id!r} is not in {self.path}",
                                        path=source or None)
            keep.append(found)
        index = {dialogue_key(d.dialogue_id): i for i, d in enumerate(keep)}
        excluded = (frozenset(self.index) | self.excluded) - frozenset(index)
        return DialogueSet(self.path, keep, self.versions, index, excluded)


@dataclass
class PredictionSet:
    """One system's predictions, aligned with a :class:`DialogueSet`."""

    path: str
    name: str
    dialogues: dict[str, PredDialogue] = field(repr=False)
    out_of_schema: Counter[str] = field(default_factory=Counter)
    """Predicted slot names outside the schema → number of turns whose state has them."""

    def for_dialogue(self, dialogue: Dialogue) -> PredDialogue:
        return self.dialogues[dialogue_key(dialogue.dialogue_id)]


def load_dialogues(path: str | Path) -> DialogueSet:
    """Stream and validate a dialogues file (JSON Lines, optionally gzipped)."""
    dialogues: list[Dialogue] = []
    index: dict[str, int] = {}
    versions: tuple[str, ...] | None = None
    for line, text in iter_jsonl_lines(path):
        dialogue = parse_line(Dialogue, text, path=path, line=line)
        key = dialogue_key(dialogue.dialogue_id)
        if key in index:
            raise InputError(f"duplicate dialogue id {dialogue.dialogue_id!r}",
                             path=path, line=line, field="dialogue_id")
        for position, turn in enumerate(dialogue.turns):
            where = f"turns[{position}]"
            if turn.turn_index != position:
                raise InputError(f"turn_index {turn.turn_index} out of order (expected {position})",
                                 path=path, line=line, field=f"{where}.turn_index")
            turn_versions = tuple(turn.gold_states)
            if versions is None:
                versions = turn_versions
            elif turn_versions != versions:
                raise InputError(
                    f"gold versions {list(turn_versions)} differ from the file's {list(versions)}",
                    path=path, line=line, field=f"{where}.gold_state")
        index[key] = len(dialogues)
        dialogues.append(dialogue)
    if not dialogues:
        raise InputError("no dialogues in file", path=path)
    return DialogueSet(str(path), dialogues, versions or (), index)


def load_predictions(
    path: str | Path, dialogues: DialogueSet, schema: Schema | None = None,
    *, name: str | None = None,
) -> PredictionSet:
    """Stream and validate a predictions file against the dialogues it predicts.

    Every dialogue id must exist in ``dialogues`` with the same number of turns, and every
    dialogue of ``dialogues`` must be predicted. Predicted slots outside the schema are
    counted (``out_of_schema``), not rejected.
    """
    by_key: dict[str, PredDialogue] = {}
    names: set[str] = set()
    out_of_schema: Counter[str] = Counter()
    known = set(schema.slot_names) if schema is not None else None
    for line, text in iter_jsonl_lines(path):
        pred = parse_line(PredDialogue, text, path=path, line=line)
        key = dialogue_key(pred.dialogue_id)
        gold = dialogues.get(pred.dialogue_id)
        if gold is None and key in dialogues.excluded:
            continue  # a dialogue of the file that this (subset) run does not evaluate
        if gold is None:
            raise DataMismatchError(
                f"unknown dialogue id {pred.dialogue_id!r} (not in {dialogues.path})",
                path=path, line=line, field="dialogue_id")
        if key in by_key:
            raise InputError(f"duplicate dialogue id {pred.dialogue_id!r}",
                             path=path, line=line, field="dialogue_id")
        if len(pred.turns) != len(gold.turns):
            raise DataMismatchError(
                f"{len(pred.turns)} predicted turns but dialogue {gold.dialogue_id!r} has "
                f"{len(gold.turns)} in {dialogues.path}", path=path, line=line, field="turns")
        previous: State = {}
        for position, turn in enumerate(pred.turns):
            where = f"turns[{position}]"
            if turn.turn_index != position:
                raise InputError(f"turn_index {turn.turn_index} out of order (expected {position})",
                                 path=path, line=line, field=f"{where}.turn_index")
            if turn.pred_state is None:
                if turn.pred_turn_state is None:
                    raise InputError("a turn needs pred_state (or at least pred_turn_state)",
                                     path=path, line=line, field=f"{where}.pred_state")
                turn.pred_state = apply_turn_state(previous, turn.pred_turn_state)
            _check_hypotheses(turn, path=path, line=line, where=where)
            previous = turn.pred_state
            if known is not None:
                for slot in turn.pred_state:
                    if slot not in known:
                        out_of_schema[slot] += 1
        if pred.system_name:
            names.add(pred.system_name)
        by_key[key] = pred
    if not by_key:
        raise InputError("no predictions in file", path=path)
    missing = [d.dialogue_id for d in dialogues.dialogues
               if dialogue_key(d.dialogue_id) not in by_key]
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise DataMismatchError(
            f"predictions cover {len(by_key)} of {len(dialogues)} dialogues; missing {shown} "
            "(evaluate a subset with --dialogue-ids)", path=path)
    label = name or (names.pop() if len(names) == 1 else _stem(path))
    return PredictionSet(str(path), label, by_key, out_of_schema)


def _stem(path: str | Path) -> str:
    name = Path(path).name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _check_hypotheses(turn: PredTurn, *, path: str | Path, line: int, where: str) -> None:
    lists: list[tuple[str, list[float]]] = []
    if turn.pred_hyps:
        lists += [(f"{where}.pred_hyps.{slot}", [s for _, s in hyps])
                  for slot, hyps in turn.pred_hyps.items()]
    if turn.pred_joint_hyps:
        lists.append((f"{where}.pred_joint_hyps", [s for _, s in turn.pred_joint_hyps]))
    for field_path, scores in lists:
        for position, score in enumerate(scores):
            if not 0.0 <= score <= 1.0 or score != score:
                raise InputError(f"score {score} is outside [0, 1]", path=path, line=line,
                                 field=f"{field_path}[{position}]")


def read_id_list(path: str | Path) -> list[str]:
    """Read a file of dialogue ids, one per line (blank lines and ``#`` comments ignored)."""
    ids = []
    for _, text in iter_jsonl_lines(path):
        text = text.strip()
        if text and not text.startswith("#"):
            ids.append(text)
    if not ids:
        raise InputError("no dialogue ids in file", path=path)
    return ids


@dataclass(frozen=True)
class IntegrationIssue:
    """A turn whose given turn output does not integrate into its given cumulative state."""

    dialogue_id: str
    turn_index: int
    expected: State
    """Previous cumulative state updated with the turn output."""
    given: State
    """The cumulative state the file gives for the turn."""

    def describe(self) -> str:
        missing = {s: v for s, v in self.expected.items() if self.given.get(s) != v}
        extra = {s: v for s, v in self.given.items() if self.expected.get(s) != v}
        return (f"{self.dialogue_id} turn {self.turn_index}: integrating the turn output gives "
                f"{missing or '{}'} where pred_state has {extra or '{}'}")


def check_integration(predictions: PredictionSet, *,
                      none_values: Iterable[str] = (NONE,)) -> list[IntegrationIssue]:
    """Turns where ``previous pred_state + pred_turn_state != pred_state``.

    Such turns mean the turn output judged by the LLM is not what the metrics score, which is
    worth knowing before comparing the two.
    """
    nones = tuple(none_values)
    issues = []
    for pred in predictions.dialogues.values():
        previous: State = {}
        for turn in pred.turns:
            given = turn.pred_state or {}
            if turn.pred_turn_state is not None:
                expected = apply_turn_state(previous, turn.pred_turn_state, none_values=nones)
                if expected != given:
                    issues.append(IntegrationIssue(pred.dialogue_id, turn.turn_index,
                                                   expected, given))
            previous = given
    return issues
