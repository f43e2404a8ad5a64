"""Loading a predictions file against the dialogues it predicts: whole, or one dialogue at a
time with the same checks (turn order, scored lists, ``pred_state`` derived from the turn
states, slot names made the schema's); and checking that each turn's output integrates into
its cumulative state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._errors import DataMismatchError, InputError
from ._convert import Context
from ._dialogues import (
    Dialogue,
    DialogueSet,
    PredDialogue,
    PredictionSet,
    PredTurn,
    dialogue_key,
)
from ._reading import _canonical, _Loc, _records
from ._schema import Schema
from ._states import NONE, State, apply_turn_state


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
