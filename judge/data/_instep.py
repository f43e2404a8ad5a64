"""Reading a dialogues file and predictions files in step, one dialogue at a time, so memory
never holds a whole file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ._convert import NATIVE
from ._dialogues import Dialogue, PredDialogue, dialogue_key
from ._load_dialogues import DialogueScan
from ._load_predictions import PredictionScan
from ._schema import Schema


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
