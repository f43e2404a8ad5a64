"""What a leaderboard scores its systems on, and each system scored into per-turn columns.

The :class:`Layout` holds the turns every system is scored on (built a dialogue at a time);
a system becomes :class:`SystemTurns`, a few bytes per turn, whether it is a predictions file,
a judge run, or a file streamed in step with the dialogues. ``_leaderboard`` turns these
columns into figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from .._errors import DataMismatchError, InputError
from .._io import read_json
from ..data import (
    Dialogue,
    DialogueSet,
    InStep,
    PredictionSet,
    Schema,
    dialogue_key,
    load_dialogues,
    load_predictions,
)
from ..metrics import MetricOptions, TurnScorer, TurnVerdicts, turn_verdicts
from ..pipeline import Run

SystemKind = Literal["predictions", "run"]


# --- what every system is scored on -------------------------------------------------------


@dataclass
class SeenValues:
    """Values a training set holds: ``(slot, value)`` pairs from a dialogues file, or bare
    values from a list (one per line, or a JSON list)."""

    source: str
    pairs: frozenset[tuple[str, str]] | None = None
    values: frozenset[str] = frozenset()

    def seen(self, slot: str, value: str) -> bool:
        if self.pairs is not None:
            return (slot, value) in self.pairs
        return value in self.values


def load_seen(path: str | Path, schema: Schema | None = None) -> SeenValues:
    """A training set's values: a ``.txt`` file (one value per line), a ``.json`` list of
    values, or a dialogues file in any format the project reads (its gold slot-value pairs,
    every version)."""
    name = str(path)
    if not Path(path).is_file():
        raise InputError("no such file (--seen)", path=path)
    if name.endswith(".txt"):
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        values = frozenset(v.strip() for v in lines if v.strip())
        if not values:
            raise InputError("no values in the file (--seen)", path=path)
        return SeenValues(name, values=values)
    if name.endswith(".json"):
        data = read_json(path)
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise InputError("a --seen JSON file holds a list of values (strings)", path=path)
        return SeenValues(name, values=frozenset(data))
    training = load_dialogues(path, schema=schema)
    pairs = {(slot, value) for d in training.dialogues for t in d.turns
             for state in t.gold_states.values() for slot, value in state.items()}
    return SeenValues(name, pairs=frozenset(pairs))


@dataclass
class Layout:
    """The turns every system is scored on, in the dialogues' order: which dialogue each turn
    belongs to (the cluster), its position, and what the gold holds (domains, unseen values)."""

    dialogue_ids: list[str]
    turns: np.ndarray
    """int64 [G]: turns per dialogue."""
    cluster: np.ndarray
    """int32 [T]: the dialogue of each turn."""
    position: np.ndarray
    """int16 [T]: 0-based turn index."""
    versions: list[str]
    domains: list[str]
    gold_domains: dict[str, np.ndarray]
    """Per version, uint32 [G]: bit d set when the dialogue's gold uses domain d."""
    unseen: dict[str, np.ndarray] | None = None
    """Per version, bool [T]: the turn's gold holds a value the training set does not."""
    seen_source: str | None = None
    index: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def num_turns(self) -> int:
        return int(self.cluster.size)

    @property
    def num_dialogues(self) -> int:
        return len(self.dialogue_ids)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.turns)[:-1]))

    @classmethod
    def of(cls, dialogues: DialogueSet, schema: Schema, versions: Sequence[str], *,
           seen: SeenValues | None = None, separator: str = "|") -> Layout:
        builder = LayoutBuilder(schema, versions, seen=seen, separator=separator)
        for dialogue in dialogues.dialogues:
            builder.add(dialogue)
        return builder.finish()


class LayoutBuilder:
    """A :class:`Layout` built a dialogue at a time (so a streaming reader never holds the
    dialogues)."""

    def __init__(self, schema: Schema, versions: Sequence[str], *,
                 seen: SeenValues | None = None, separator: str = "|") -> None:
        self.schema, self.versions, self.seen, self.separator = (schema, list(versions), seen,
                                                                 separator)
        self.domains = [d.domain for d in schema.domains[:32]]
        self.bit = {name: 1 << i for i, name in enumerate(self.domains)}
        self.ids: list[str] = []
        self.turns: list[int] = []
        self.masks: dict[str, list[int]] = {v: [] for v in versions}
        self.unseen: dict[str, list[bool]] = {v: [] for v in versions}

    def add(self, dialogue: Dialogue) -> None:
        self.ids.append(dialogue.dialogue_id)
        self.turns.append(len(dialogue.turns))
        domain_of, seen = self.schema.domain_of, self.seen
        for version in self.versions:
            mask = 0
            flags = self.unseen[version]
            for turn in dialogue.turns:
                state = turn.gold_states[version]
                for slot in state:
                    mask |= self.bit.get(domain_of(slot), 0)
                if seen is not None:
                    flags.append(any(
                        not any(seen.seen(slot, v) for v in value.split(self.separator))
                        for slot, value in state.items() if value not in _SPECIAL))
            self.masks[version].append(mask)

    def finish(self) -> Layout:
        turns = np.array(self.turns, dtype=np.int64)
        cluster = np.repeat(np.arange(len(turns), dtype=np.int32), turns)
        position = (np.concatenate([np.arange(n, dtype=np.int16) for n in self.turns])
                    if self.turns else np.zeros(0, np.int16))
        unseen = ({v: np.array(f, dtype=bool) for v, f in self.unseen.items()}
                  if self.seen is not None else None)
        return Layout(self.ids, turns, cluster, position, self.versions, self.domains,
                      {v: np.array(m, dtype=np.uint32) for v, m in self.masks.items()},
                      unseen, self.seen.source if self.seen is not None else None,
                      {dialogue_key(d): g for g, d in enumerate(self.ids)})


_SPECIAL = frozenset({"dontcare", "none"})


# --- one system, scored ------------------------------------------------------------------


@dataclass
class SystemTurns:
    """One system's per-turn verdicts: exact match per gold version and, for a judge run, the
    judge's TSA and JGA (int8: 1 right, 0 wrong, -1 no verdict)."""

    name: str
    kind: SystemKind
    source: str
    golds: dict[str, TurnVerdicts]
    tsa: np.ndarray | None = None
    judge_jga: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        extra = sum(a.nbytes for a in (self.tsa, self.judge_jga) if a is not None)
        return sum(v.nbytes for v in self.golds.values()) + extra


def score_predictions(dialogues: DialogueSet, predictions: PredictionSet, schema: Schema, *,
                      versions: Sequence[str], options: MetricOptions,
                      name: str | None = None, fga_lambda: float | None = None,
                      kind: SystemKind = "predictions", source: str | None = None
                      ) -> SystemTurns:
    """A predictions file's verdicts against every version (the predictions can be dropped
    afterwards: nothing here refers to them)."""
    lam = _fga_lambda(options) if fga_lambda is None else fga_lambda
    golds = {v: turn_verdicts(dialogues, predictions, schema, version=v, options=options,
                              fga_lambda=lam) for v in versions}
    return SystemTurns(name or predictions.name, kind, source or predictions.path, golds)


def _fga_lambda(options: MetricOptions) -> float:
    """The FGA a leaderboard reports: lambda 0.5 (the FGA paper's choice) when asked for, else
    the first lambda of the options."""
    return 0.5 if 0.5 in options.fga_lambdas else options.fga_lambdas[0]


def run_predictions_path(run: Run) -> str:
    """The predictions file a judge run recorded (it must still be there)."""
    path = (run.summary.get("data") or {}).get("predictions")
    if not path or not Path(path).is_file():
        raise DataMismatchError(f"the predictions file this run judged ({path}) is not there",
                                path=run.path)
    return str(path)


def score_run(run: Run, dialogues: DialogueSet, schema: Schema, *, versions: Sequence[str],
              options: MetricOptions, name: str | None = None,
              predictions: PredictionSet | None = None) -> SystemTurns:
    """A judge run as a system: exact match of the predictions it judged, and the judge's own
    TSA and JGA per turn. The run must cover every turn of ``dialogues``."""
    if predictions is None:
        predictions = load_predictions(run_predictions_path(run), dialogues, schema)
    label = name or (run.summary.get("data") or {}).get("system") or run.path.name
    system = score_predictions(dialogues, predictions, schema, versions=versions,
                               options=options, name=str(label), kind="run",
                               source=str(run.path))
    system.tsa, system.judge_jga = _run_columns(run, dialogues)
    return system


def _run_columns(run: Run, dialogues: DialogueSet) -> tuple[np.ndarray, np.ndarray]:
    offsets: dict[str, tuple[int, int]] = {}
    row = 0
    for dialogue in dialogues.dialogues:
        offsets[dialogue_key(dialogue.dialogue_id)] = (row, len(dialogue.turns))
        row += len(dialogue.turns)
    tsa = np.full(row, -2, dtype=np.int8)
    jga = np.full(row, -1, dtype=np.int8)
    for record in run.rows:
        found = offsets.get(dialogue_key(record["dialogue_id"]))
        if found is None:
            continue  # a dialogue outside the leaderboard's set (a subset was asked for)
        start, length = found
        turn = record["turn_index"]
        if turn >= length:
            raise DataMismatchError(
                f"turn {turn} of dialogue {record['dialogue_id']!r} is beyond its "
                f"{length} turns in {dialogues.path}", path=run.path)
        tsa[start + turn] = -1 if record["verdict"] is None else int(record["verdict"])
        value = record.get("jga")
        jga[start + turn] = -1 if value is None else int(value)
    missing = np.flatnonzero(tsa == -2)
    if missing.size:
        ids = list(dict.fromkeys(
            dialogues.dialogues[int(np.searchsorted(_starts(dialogues), m, "right") - 1)]
            .dialogue_id for m in missing[:200]))
        shown = ", ".join(ids[:3]) + (" ..." if len(ids) > 3 else "")
        raise DataMismatchError(
            f"the run judged {row - missing.size} of the {row} turns of the leaderboard's "
            f"dialogues; missing turns of {shown} (narrow the set with --dialogue-ids)",
            path=run.path)
    return tsa, jga


def _starts(dialogues: DialogueSet) -> np.ndarray:
    return np.cumsum([0] + [len(d.turns) for d in dialogues.dialogues[:-1]])


def stream_predictions(dialogues_path: str | Path, paths: Sequence[str | Path],
                       schema: Schema, *, versions: Sequence[str] | None,
                       options: MetricOptions, names: Sequence[str] | None = None,
                       seen: SeenValues | None = None
                       ) -> tuple[Layout, list[SystemTurns]]:
    """Score predictions files reading them in step with the dialogues file, one dialogue
    at a time: memory holds one dialogue and each system's per-turn columns, never a whole
    file (the way to a test set of any size). Raises :class:`NotInStep` when a file does not
    follow the dialogues' order or is in another format than the native one."""
    files = InStep(dialogues_path, paths, schema)
    lam = _fga_lambda(options)
    layout: LayoutBuilder | None = None
    scorers: list[dict[str, TurnScorer]] = []
    chosen: list[str] = []
    for dialogue, preds in files:
        if layout is None:
            probe = DialogueSet(str(dialogues_path), [], dialogue.versions, {})
            chosen = ([probe.resolve_version(v) for v in versions] if versions
                      else [probe.resolve_version(None)])
            layout = LayoutBuilder(schema, chosen, seen=seen,
                                   separator=schema.multi_value_separator)
            scorers = [{v: TurnScorer(schema, options, fga_lambda=lam) for v in chosen}
                       for _ in paths]
        layout.add(dialogue)
        for pred, by_version in zip(preds, scorers, strict=True):
            states = [t.pred_state or {} for t in pred.turns]
            for version, scorer in by_version.items():
                scorer.add([t.gold_states[version] for t in dialogue.turns], states)
    if layout is None:
        raise InputError("no dialogues in file", path=dialogues_path)
    systems = [SystemTurns(names[k] if names else scan.name, "predictions", scan.path,
                           {v: scorer.finish() for v, scorer in scorers[k].items()})
               for k, scan in enumerate(files.scans)]
    return layout.finish(), systems
