"""Loading the input files (schema, dialogues, predictions, native or converted on the fly)
with human-readable errors.

File formats (JSON Lines, optionally gzipped, one dialogue per line) follow the layout of
``shared/data/multiwoz``; see the README's *File formats* section. Gold states per annotation
version are read from ``gold_state_<tag>`` keys (``gold_state_21`` → version ``2.1``); a bare
``gold_state`` is the single version ``gold``.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._errors import DataMismatchError, InputError, OptionError
from .._io import MAX_NAME_CHARS, iter_jsonl_lines, parse_line, validation_error
from ._convert import NATIVE, Context, Kind, raise_located, read_foreign
from ._schema import Schema
from ._states import NONE, State, apply_turn_state

ModelT = TypeVar("ModelT", bound=BaseModel)

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


# --- reading records, native or converted ---------------------------------------------------


@dataclass(frozen=True)
class _Loc:
    """Where a record came from: a JSON Lines line, or a place in a converted file."""

    path: str | Path
    line: int | None
    where: str | None = None

    def field(self, name: str | None) -> str | None:
        if self.where is None:
            return name
        return f"{self.where}.{name}" if name else self.where

    def error(self, message: str, field: str | None = None, *,
              mismatch: bool = False) -> InputError:
        kind = DataMismatchError if mismatch else InputError
        return kind(message, path=self.path, line=self.line, field=self.field(field))


def _records(model: type[ModelT], path: str | Path, kind: Kind, context: Context,
             fmt: str | None) -> tuple[str, Iterator[tuple[_Loc, ModelT]]]:
    """The format name and the validated records of a file of ``kind``, native or converted."""
    found, _, located = read_foreign(path, kind, context, fmt=fmt)
    if found.name == NATIVE:
        return NATIVE, ((_Loc(path, line), _parse_native(model, text, path, line))
                        for line, text in iter_jsonl_lines(path))

    def converted() -> Iterator[tuple[_Loc, ModelT]]:
        for where, record in located():
            try:
                yield _Loc(path, None, where), model.model_validate(record)
            except ValidationError as exc:
                raise raise_located(validation_error(exc, path=path, line=None),
                                    where) from None

    return found.name, converted()


_GOLD_FIELD = re.compile(r"^turns\[(\d+)\]\.(gold_states|gold_turn_states)\.(.+)$")


def _parse_native(model: type[ModelT], text: str, path: str | Path, line: int) -> ModelT:
    """One native record; a problem inside a gold state is named by the key the file wrote
    (``gold_state_21``), not by the parsed form (``gold_states.2.1``)."""
    try:
        return parse_line(model, text, path=path, line=line)
    except InputError as exc:
        found = _GOLD_FIELD.match(exc.field or "")
        if found is None:
            raise
        index, parsed, inside = found.groups()
        try:
            turn = json.loads(text)["turns"][int(index)]
        except (ValueError, LookupError, TypeError):
            raise exc from None
        for key in turn if isinstance(turn, dict) else ():
            match = _GOLD_KEY.match(key)
            if not match or key in ("gold_states", "gold_turn_states"):
                continue
            version = version_label(match.group(2))
            if (bool(match.group(1)) == (parsed == "gold_turn_states")
                    and (inside == version or inside.startswith(version + "."))):
                raise InputError(exc.reason, path=path, line=line,
                                 field=f"turns[{index}].{key}{inside[len(version):]}") from None
        raise


def _canonical(state: State, schema: Schema, renamed: Counter[str]) -> State:
    """``state`` with every slot name the schema knows under another spelling (an alias, a
    MultiWOZ 2.2 name, ``Hotel-Price Range``) written as the schema's name; each renaming is
    counted as ``'written -> canonical'``. A slot given under both spellings keeps the value
    given under the schema's own name."""
    if all(name in schema.slots for name in state):
        return state
    out: State = {}
    for name, value in state.items():
        slot = schema.resolve_slot(name)
        if slot is None or slot == name:
            out[name] = value
            continue
        renamed[f"{name} -> {slot}"] += 1
        if slot not in state:
            out[slot] = value
    return out


def load_dialogues(path: str | Path, *, schema: Schema | None = None,
                   version: str | None = None, fmt: str | None = None) -> DialogueSet:
    """Read and validate a dialogues file: native JSON Lines (optionally gzipped) or any
    known format, converted on the fly (see :data:`judge.data.FORMAT_NAMES`).

    With a ``schema``, gold slot names spelled another way (aliases, MultiWOZ 2.2 names) are
    renamed to the schema's and counted (``renamed``). ``version`` labels the gold states of a
    converted file that holds one annotation version (MultiWOZ ``data.json``: default from the
    path, e.g. ``2.4``).
    """
    scan = DialogueScan(path, schema=schema, version=version, fmt=fmt)
    dialogues = list(scan)
    if not dialogues:
        raise InputError("no dialogues in file", path=path)
    return DialogueSet(str(path), dialogues, scan.versions or (), scan.index,
                       source_format=scan.source_format, renamed=scan.renamed)


class DialogueScan:
    """The dialogues of a file one at a time, with every check of :func:`load_dialogues`
    (duplicate ids, turn order, one set of gold versions), for a reader that must not hold
    the whole file (the service checks uploads this way). After the loop: ``versions``,
    ``index`` (dialogue key → position), ``renamed`` and ``source_format``."""

    def __init__(self, path: str | Path, *, schema: Schema | None = None,
                 version: str | None = None, fmt: str | None = None) -> None:
        self.path = path
        self.schema = schema
        self.source_format, self._records = _records(
            Dialogue, path, "dialogues", Context(schema=schema, version=version), fmt)
        self.index: dict[str, int] = {}
        self.versions: tuple[str, ...] | None = None
        self.renamed: Counter[str] = Counter()

    def __iter__(self) -> Iterator[Dialogue]:
        for loc, dialogue in self._records:
            key = dialogue_key(dialogue.dialogue_id)
            if key in self.index:
                raise loc.error(f"duplicate dialogue id {dialogue.dialogue_id!r}",
                                "dialogue_id")
            self._check_turns(loc, dialogue)
            self.index[key] = len(self.index)
            yield dialogue

    def _check_turns(self, loc: _Loc, dialogue: Dialogue) -> None:
        for position, turn in enumerate(dialogue.turns):
            where = f"turns[{position}]"
            if turn.turn_index != position:
                raise loc.error(f"turn_index {turn.turn_index} out of order (expected "
                                f"{position})", f"{where}.turn_index")
            turn_versions = tuple(turn.gold_states)
            if self.versions is None:
                self.versions = turn_versions
            elif turn_versions != self.versions:
                raise loc.error(f"gold versions {list(turn_versions)} differ from the file's "
                                f"{list(self.versions)}", f"{where}.gold_state")
            for table in (turn.gold_states, turn.gold_turn_states):
                kept: list[State] = []
                for label, state in table.items():
                    if self.schema is not None:
                        table[label] = state = _canonical(state, self.schema, self.renamed)
                    _share_values(state)
                    # versions that agree share one state (nothing edits a state in place:
                    # corrections and renamings make new ones)
                    same = next((k for k in kept if k == state), None)
                    if same is not None:
                        table[label] = same
                    else:
                        kept.append(state)


# --- predictions, step by step ----------------------------------------------------------------


def load_predictions(
    path: str | Path, dialogues: DialogueSet, schema: Schema | None = None,
    *, name: str | None = None, fmt: str | None = None,
) -> PredictionSet:
    """Read and validate a predictions file (native or any known format) against the
    dialogues it predicts.

    Every dialogue id must exist in ``dialogues`` with the same number of turns, and every
    dialogue of ``dialogues`` must be predicted. With a ``schema``, slot names spelled another
    way are renamed to the schema's (counted in ``renamed``; the written names stay on each
    turn for ``--semantics paper``); slots still outside the schema are counted
    (``out_of_schema``), not rejected.
    """
    context = Context(schema=schema, system_name=name, dialogue_order=[
        (d.dialogue_id, len(d.turns)) for d in dialogues.dialogues])
    source_format, records = _records(PredDialogue, path, "predictions", context, fmt)
    result = PredictionSet(str(path), "", {}, source_format=source_format)
    names: set[str] = set()
    for loc, pred in records:
        gold = _matching_dialogue(pred, dialogues, result.dialogues, loc)
        if gold is None:
            continue  # a dialogue of the file that this (subset) run does not evaluate
        _complete_turns(pred, loc)
        if schema is not None:
            _canonical_turns(pred, schema, result.renamed)
            _count_out_of_schema(pred, schema, result.out_of_schema)
        if pred.system_name:
            names.add(pred.system_name)
        result.dialogues[dialogue_key(pred.dialogue_id)] = pred
    _check_coverage(result, dialogues, path)
    result.name = name or (names.pop() if len(names) == 1 else _stem(path))
    return result


class PredictionScan:
    """A predictions file one dialogue at a time, each record checked and completed as
    :func:`load_predictions` does it (turn order, ``pred_state`` derived from the turn states,
    slot names renamed to the schema's), for a reader that must not hold the whole file (a
    leaderboard reads many systems in step with the dialogues). Matching a record to its
    dialogue is the caller's: :attr:`line` is the current record's line for its messages.
    ``source_format`` is known before the loop (a converted file may need the dialogue order
    first: check it is ``native`` to read in step)."""

    def __init__(self, path: str | Path, schema: Schema | None = None, *,
                 name: str | None = None, fmt: str | None = None,
                 dialogue_order: list[tuple[str, int]] | None = None) -> None:
        self.path = str(path)
        self.schema = schema
        context = Context(schema=schema, system_name=name, dialogue_order=dialogue_order)
        self.source_format, self._records = _records(PredDialogue, path, "predictions",
                                                     context, fmt)
        self.renamed: Counter[str] = Counter()
        self.out_of_schema: Counter[str] = Counter()
        self.names: set[str] = set()
        self.line: int | None = None

    def __iter__(self) -> Iterator[PredDialogue]:
        for loc, pred in self._records:
            self.line = loc.line
            _complete_turns(pred, loc)
            if self.schema is not None:
                _canonical_turns(pred, self.schema, self.renamed)
                _count_out_of_schema(pred, self.schema, self.out_of_schema)
            if pred.system_name:
                self.names.add(pred.system_name)
            yield pred

    @property
    def name(self) -> str:
        """The system's name: the one its records give, else the file's stem."""
        return next(iter(self.names)) if len(self.names) == 1 else _stem(self.path)


class NotInStep(Exception):
    """The files cannot be read in step (another order, a missing or extra dialogue, another
    turn count, a converted format): the caller loads them whole instead, where every such
    problem gets its full message."""


class InStep:
    """A dialogues file and predictions files read in step, one dialogue at a time: each
    iteration yields a dialogue and every system's record of it, so memory holds one
    dialogue, never a whole file (the leaderboard and the exact-match suite read test sets
    of any size this way). Raises :class:`NotInStep` when a file is not native or does not
    follow the dialogues' order; the scans' counters (``renamed``, ``out_of_schema``,
    ``name``) and the dialogues' ``versions`` are complete after the loop."""

    def __init__(self, dialogues_path: str | Path, paths: Iterable[str | Path],
                 schema: Schema | None) -> None:
        self.scans = [PredictionScan(path, schema) for path in paths]
        self.dialogues = DialogueScan(dialogues_path, schema=schema)
        if self.dialogues.source_format != NATIVE or any(
                scan.source_format != NATIVE for scan in self.scans):
            raise NotInStep("a file in another format than the native one")
        self.num_turns = 0

    def __iter__(self) -> Iterator[tuple[Dialogue, list[PredDialogue]]]:
        readers = [iter(scan) for scan in self.scans]
        for dialogue in self.dialogues:
            key = dialogue_key(dialogue.dialogue_id)
            preds = []
            for reader in readers:
                pred = next(reader, None)
                if (pred is None or dialogue_key(pred.dialogue_id) != key
                        or len(pred.turns) != len(dialogue.turns)):
                    raise NotInStep(dialogue.dialogue_id)
                preds.append(pred)
            self.num_turns += len(dialogue.turns)
            yield dialogue, preds
        if any(next(reader, None) is not None for reader in readers):
            raise NotInStep("predictions of dialogues the file does not have")


def _matching_dialogue(pred: PredDialogue, dialogues: DialogueSet,
                       seen: dict[str, PredDialogue], loc: _Loc) -> Dialogue | None:
    """The gold dialogue a predicted one belongs to (None: left out of this subset); unknown
    ids, duplicates and turn counts that differ are errors."""
    key = dialogue_key(pred.dialogue_id)
    gold = dialogues.get(pred.dialogue_id)
    if gold is None and key in dialogues.excluded:
        return None
    if gold is None:
        raise loc.error(f"unknown dialogue id {pred.dialogue_id!r} (not in {dialogues.path})",
                        "dialogue_id", mismatch=True)
    if key in seen:
        raise loc.error(f"duplicate dialogue id {pred.dialogue_id!r}", "dialogue_id")
    if len(pred.turns) != len(gold.turns):
        raise loc.error(f"{len(pred.turns)} predicted turns but dialogue {gold.dialogue_id!r} "
                        f"has {len(gold.turns)} in {dialogues.path}", "turns", mismatch=True)
    return gold


def _complete_turns(pred: PredDialogue, loc: _Loc) -> None:
    """Check turn order and scored lists; derive ``pred_state`` from ``pred_turn_state``
    where a turn gives only the latter."""
    previous: State = {}
    for position, turn in enumerate(pred.turns):
        where = f"turns[{position}]"
        if turn.turn_index != position:
            raise loc.error(f"turn_index {turn.turn_index} out of order (expected {position})",
                            f"{where}.turn_index")
        if turn.pred_state is None:
            if turn.pred_turn_state is None:
                raise loc.error("a turn needs pred_state (or at least pred_turn_state)",
                                f"{where}.pred_state")
            turn.pred_state = apply_turn_state(previous, turn.pred_turn_state)
        _check_hypotheses(turn, loc, where)
        previous = turn.pred_state


def _share_values(state: State) -> None:
    """One string object per distinct gold value (``sys.intern``), in place: a cumulative
    state repeats its values turn after turn and version after version, and the gold states
    are read as plain JSON, which makes a new string for each. (Predicted states go through
    pydantic, whose parser already shares them.)"""
    for slot, value in state.items():
        if type(value) is str:
            state[slot] = sys.intern(value)


def _canonical_turns(pred: PredDialogue, schema: Schema, renamed: Counter[str]) -> None:
    """Schema names for every predicted slot; the written states are kept when they differ."""
    for turn in pred.turns:
        assert turn.pred_state is not None
        state = _canonical(turn.pred_state, schema, renamed)
        output = (_canonical(turn.pred_turn_state, schema, renamed)
                  if turn.pred_turn_state is not None else None)
        if state is not turn.pred_state or output is not turn.pred_turn_state:
            turn.written_pred_state, turn.written_pred_turn_state = (turn.pred_state,
                                                                     turn.pred_turn_state)
            turn.pred_state, turn.pred_turn_state = state, output
        if turn.pred_hyps:
            turn.pred_hyps = {schema.resolve_slot(s) or s: h for s, h in turn.pred_hyps.items()}


def _count_out_of_schema(pred: PredDialogue, schema: Schema, counter: Counter[str]) -> None:
    """Per turn, each name outside the schema that its state or its turn state holds (the
    judge reads the turn state: a name only there is still a wrong prediction)."""
    for turn in pred.turns:
        for slot in {*(turn.pred_state or {}), *(turn.pred_turn_state or {})}:
            if slot not in schema.slots:
                counter[slot] += 1


def _check_coverage(result: PredictionSet, dialogues: DialogueSet, path: str | Path) -> None:
    if not result.dialogues:
        raise InputError("no predictions in file", path=path)
    missing = [d.dialogue_id for d in dialogues.dialogues
               if dialogue_key(d.dialogue_id) not in result.dialogues]
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise DataMismatchError(
            f"predictions cover {len(result.dialogues)} of {len(dialogues)} dialogues; missing "
            f"{shown} (evaluate a subset with --dialogue-ids)", path=path)


def _stem(path: str | Path) -> str:
    name = Path(path).name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _check_hypotheses(turn: PredTurn, loc: _Loc, where: str) -> None:
    lists: list[tuple[str, list[float]]] = []
    if turn.pred_hyps:
        lists += [(f"{where}.pred_hyps.{slot}", [s for _, s in hyps])
                  for slot, hyps in turn.pred_hyps.items()]
    if turn.pred_joint_hyps:
        lists.append((f"{where}.pred_joint_hyps", [s for _, s in turn.pred_joint_hyps]))
    for field_path, scores in lists:
        for position, score in enumerate(scores):
            if not 0.0 <= score <= 1.0 or score != score:
                raise loc.error(f"score {score} is outside [0, 1]", f"{field_path}[{position}]")


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
    return [issue for pred in predictions.dialogues.values()
            for issue in dialogue_integration(pred, none_values=none_values)]


def dialogue_integration(pred: PredDialogue, *,
                         none_values: Iterable[str] = (NONE,)) -> list[IntegrationIssue]:
    """:func:`check_integration` of one predicted dialogue (for a reader in step)."""
    nones = tuple(none_values)
    issues = []
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


def load_schema(path: str | Path, *, fmt: str | None = None) -> Schema:
    """Load and validate a schema file; errors name the file and the offending field.

    Besides the native layout, a schema may be a list of services (SGD, MultiWOZ 2.2) or a
    ConvLab-3 ``ontology.json``; those are converted on the fly (``source_format`` says which).
    """
    found, source, read = read_foreign(path, "schema", fmt=fmt)
    data = source.document if found.name == "native-schema" else read()
    try:
        schema = Schema.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, path=path, line=None) from None
    schema._source_format = found.name
    return schema
