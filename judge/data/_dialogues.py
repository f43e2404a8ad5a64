"""The records of the input files (dialogues and their turns, one system's predictions) and
the sets a file loads into, keyed by dialogue id.

File formats (JSON Lines, optionally gzipped, one dialogue per line) follow the layout of
``shared/data/multiwoz``; see the README's *File formats* section. Gold states per annotation
version are read from ``gold_state_<tag>`` keys (``gold_state_21`` → version ``2.1``); a bare
``gold_state`` is the single version ``gold``. Reading and checking the files is the loaders'
(``_reading``, ``_load_dialogues``, ``_load_predictions``); these types know no file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._errors import DataMismatchError, OptionError
from .._io import MAX_NAME_CHARS
from ._states import State

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

    def to_record(self) -> dict[str, Any]:
        """The dialogue as a native file record (``gold_state_<tag>`` keys, extras kept)."""
        record = self.model_dump(mode="json", exclude={"turns"})
        record["turns"] = [_turn_record(turn) for turn in self.turns]
        return record


def _gold_key_of(version: str, *, turn: bool = False) -> str:
    base = "gold_turn_state" if turn else "gold_state"
    return base if version == DEFAULT_VERSION else f"{base}_{version.replace('.', '')}"


def _turn_record(turn: Turn) -> dict[str, Any]:
    record = turn.model_dump(mode="json", exclude={"gold_states", "gold_turn_states"})
    for version, state in turn.gold_states.items():
        record[_gold_key_of(version)] = state
    for version, state in turn.gold_turn_states.items():
        record[_gold_key_of(version, turn=True)] = state
    return record


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
    written_pred_state: State | None = Field(default=None, exclude=True)
    """``pred_state`` as the file wrote it, when loading renamed slots to the schema's."""
    written_pred_turn_state: State | None = Field(default=None, exclude=True)
    """``pred_turn_state`` as written, when renamed (``--semantics paper`` judges this)."""

    def as_written(self) -> tuple[State, State | None]:
        """``(pred_state, pred_turn_state)`` with the slot names the file used."""
        if self.written_pred_state is not None:
            return self.written_pred_state, self.written_pred_turn_state
        return self.pred_state or {}, self.pred_turn_state


class PredDialogue(BaseModel):
    """A DST system's outputs for one dialogue."""

    model_config = ConfigDict(extra="allow")

    dialogue_id: str = Field(min_length=1)
    system_name: str | None = Field(None, max_length=MAX_NAME_CHARS)
    turns: list[PredTurn] = Field(min_length=1)

    def to_record(self) -> dict[str, Any]:
        """The predictions of the dialogue as a native file record (unset fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


@dataclass
class DialogueSet:
    """The dialogues of one file, in file order, with the annotation versions they carry."""

    path: str
    dialogues: list[Dialogue]
    versions: tuple[str, ...]
    index: dict[str, int] = field(repr=False)
    excluded: frozenset[str] = field(default=frozenset(), repr=False)
    """Keys of dialogues the file has but a subset left out (their predictions are skipped)."""
    source_format: str = "native"
    """The format the file was in (``native``, or the one converted on the fly)."""
    renamed: Counter[str] = field(default_factory=Counter, repr=False)
    """Gold slot names renamed to the schema's: ``'written -> canonical'`` → occurrences."""

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
        return DialogueSet(self.path, keep, self.versions, index, excluded,
                           self.source_format, self.renamed)


@dataclass
class PredictionSet:
    """One system's predictions, aligned with a :class:`DialogueSet`."""

    path: str
    name: str
    dialogues: dict[str, PredDialogue] = field(repr=False)
    out_of_schema: Counter[str] = field(default_factory=Counter)
    """Predicted slot names outside the schema → number of turns whose state has them."""
    source_format: str = "native"
    """The format the file was in (``native``, or the one converted on the fly)."""
    renamed: Counter[str] = field(default_factory=Counter)
    """Predicted slot names renamed to the schema's: ``'written -> canonical'`` → count."""

    def for_dialogue(self, dialogue: Dialogue) -> PredDialogue:
        return self.dialogues[dialogue_key(dialogue.dialogue_id)]
