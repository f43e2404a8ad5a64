"""Loading a dialogues file (gold states per annotation version): whole, or one dialogue at
a time with the same checks."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from .._errors import InputError
from ._convert import Context
from ._dialogues import Dialogue, DialogueSet, dialogue_key
from ._reading import _canonical, _Loc, _records
from ._schema import Schema
from ._states import State


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


def _share_values(state: State) -> None:
    """One string object per distinct gold value (``sys.intern``), in place: a cumulative
    state repeats its values turn after turn and version after version, and the gold states
    are read as plain JSON, which makes a new string for each. (Predicted states go through
    pydantic, whose parser already shares them.)"""
    for slot, value in state.items():
        if type(value) is str:
            state[slot] = sys.intern(value)
