"""Collect a finished batch: its completions integrated exactly as live ones, each system's
run kept in its :class:`~judge.pipeline.RunStore` as a live run is (manifest, call log,
results)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._config import JudgeConfig
from .._errors import ModelError, OptionError, RunConflict
from ..data import DialogueSet, PredictionSet, Schema
from ..method import RuleSet
from ..model import Completion, call_key
from ._answer import CallResult, RecordedSource, RunHooks, answer_plan
from ._batch import System, fan_out_systems, line_keys
from ._evaluate import system_dirs
from ._plan import EvaluationPlan, plan_evaluation
from ._result import EvaluationResult, build_result
from ._rundir import RunDirectory, build_manifest
from ._store import RunStore


def collect(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
            predictions: PredictionSet,
            records: dict[tuple[str, int, str], Completion | ModelError], *,
            rules: RuleSet | None = None, out_dir: str | Path | None = None,
            store: RunStore | None = None, force: bool = False,
            sources: dict[str, Any] | None = None,
            keep_files: Sequence[str | Path] = (),
            on_result: Callable[[CallResult], None] | None = None,
            plan: EvaluationPlan | None = None, kind: str = "batch",
            extra: dict[str, Any] | None = None) -> EvaluationResult:
    """Integrate a finished batch's completions exactly as live ones (no re-asks); a call
    whose request body was sent once for several calls gets that line's answer.

    With ``out_dir`` (a run directory) or ``store`` (any :class:`RunStore`) the run is kept
    there as a live run is: under a manifest of ``kind`` (``batch``; a store holding another
    run is refused unless ``force``), every answered call in its log, then the results;
    ``keep_files`` (the downloaded batch output) are moved into ``out_dir``. ``kind``
    ``evaluate`` keeps the collected run as one that ``retry-errors`` continues live (the
    service's batch jobs), with ``extra`` sections added to its manifest (what was
    submitted). ``on_result`` sees every answered call as the log records it; ``plan``: the
    plan of these inputs, when the caller has made it already.
    """
    if out_dir is not None and store is not None:
        raise OptionError("a run is kept in one place: give out_dir or store, not both")
    plan = plan or plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    if store is None and out_dir is not None:
        store = RunDirectory(out_dir)
    return _collect([(None, plan)], [store], records, force=force, sources=sources,
                    keep_files=keep_files, keep_dir=out_dir, on_result=on_result,
                    manifest=lambda p: {**build_manifest(p, sources, kind=kind),
                                        **(extra or {})})[0]


def collect_systems(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                    predictions: Sequence[PredictionSet],
                    records: dict[tuple[str, int, str], Completion | ModelError], *,
                    rules: RuleSet | None = None, out_dir: str | Path | None = None,
                    force: bool = False, sources: dict[str, Any] | None = None,
                    keep_files: Sequence[str | Path] = ()) -> list[EvaluationResult]:
    """:func:`collect` for several systems whose requests were written together
    (``write_requests`` with their :func:`system_dirs` names): every call is answered from
    the shared lines, so each system gets the results a batch of its own would give, without
    paying twice for a body two systems share.

    With ``out_dir`` each system's run directory is ``out_dir/<system>``, and ``keep_files``
    are moved into ``out_dir`` itself (they belong to every system).
    """
    names = system_dirs(predictions)
    if out_dir is not None and RunDirectory(out_dir).read_manifest() is not None:
        raise RunConflict(f"{out_dir} holds a single run; several systems need a directory "
                          "of their own (one run directory per system inside it)")
    systems: list[System] = [(name, plan_evaluation(config, schema, dialogues, p, rules=rules))
                             for name, p in zip(names, predictions, strict=True)]
    stores: list[RunStore | None] = [
        RunDirectory(Path(out_dir) / name) if out_dir is not None else None for name in names]
    return _collect(systems, stores, records, force=force, sources=sources,
                    keep_files=keep_files, keep_dir=out_dir,
                    manifest=lambda p: build_manifest(p, sources, kind="batch"))


def _collect(systems: list[System], stores: Sequence[RunStore | None],
             records: dict[tuple[str, int, str], Completion | ModelError], *, force: bool,
             sources: dict[str, Any] | None, keep_files: Sequence[str | Path],
             keep_dir: str | Path | None,
             manifest: Callable[[EvaluationPlan], dict[str, Any]],
             on_result: Callable[[CallResult], None] | None = None) -> list[EvaluationResult]:
    """Open every system's run store, answer every system from the records (each answered
    call logged in its store), write the results; each summary counts its calls' lines
    (missing, shared) and the lines no call used."""
    try:
        logged: list[dict[str, dict[str, Any]]] = []
        for (_, plan), store in zip(systems, stores, strict=True):
            earlier = store.start(manifest(plan), resume=False, force=force) \
                if store is not None else []
            logged.append({str(e["custom_id"]): e for e in earlier})
        unused = len(set(records) - line_keys(systems))
        results = []
        for (name, plan), answered, store, known in zip(
                systems, fan_out_systems(systems, records), stores, logged, strict=True):
            hooks = RunHooks(on_result=_collected(store, known, on_result))
            result = build_result(plan,
                                  asyncio.run(answer_plan(plan, RecordedSource(answered),
                                                          hooks)),
                                  batch=True)
            own = line_keys([(name, plan)]) & set(records)
            calls = result.summary["calls"]
            calls["batch_lines_unused"] = unused
            expected = {call_key(c.dialogue_id, c.turn_index, c.dimension) for c in plan.calls}
            calls["batch_lines_missing"] = len(expected - set(answered))
            calls["batch_lines_shared"] = len(answered) - len(own)
            results.append(result)
        if keep_dir is not None:
            folder = Path(keep_dir)
            for path in map(Path, keep_files):
                if path.resolve().parent != folder.resolve():
                    shutil.move(str(path), folder / path.name)
        for store, result in zip(stores, results, strict=True):
            if store is not None:
                store.write_results(result.rows, result.summary)
        return results
    finally:
        for store in stores:
            if store is not None:
                store.close()


def _collected(store: RunStore | None, known: dict[str, dict[str, Any]],
               on_result: Callable[[CallResult], None] | None
               ) -> Callable[[CallResult], None] | None:
    """What hears each collected call: its store logs it (unless the log holds this very
    record already: the same batch collected again), then ``on_result``."""
    if store is None:
        return on_result

    def finished(result: CallResult) -> None:
        if known.get(result.custom_id) != json.loads(json.dumps(vars(result))):
            store.append(result)
        if on_result is not None:
            on_result(result)

    return finished
