"""The audit's inputs: judge runs and predictions files read as sources of predicted states
(with the judge's view of each turn for a run), and the dialogues and schema they are
audited against."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DataMismatchError, OptionError
from ..data import DialogueSet, PredictionSet, Schema, State, apply_turn_state, dialogue_key
from ..pipeline import Run


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
