"""The run: plan calls → answer them (live, cached, or from a Batch API file) → parse with
re-asks → filter and integrate → results; the run log behind an interface (:class:`RunStore`),
with run directories its folder implementation."""

import warnings as _warnings
from typing import Any as _Any

from ._answer import CallResult, RunProgress
from ._batch import (
    RequestFiles,
    default_record,
    fan_out,
    fan_out_systems,
    read_record,
    record_ids,
    request_files,
    submit_files,
    write_requests,
)
from ._collect import collect, collect_systems
from ._cost import DryRun, cached_request_keys, dry_run
from ._evaluate import (
    TRANSPORT_OPTIONS,
    RunEnvironment,
    evaluate,
    evaluate_async,
    evaluate_systems,
    evaluate_systems_async,
    open_ledger,
    retry_errors,
    rules_for,
    system_dirs,
)
from ._plan import EvaluationPlan, PlannedCall, PlannedTurn, call_chains, plan_evaluation
from ._result import EvaluationResult, corrected_rows, with_gold_versions
from ._rundir import RunDirectory, build_manifest, load_run, write_results
from ._store import Run, RunStore, same_run

__all__ = [
    "TRANSPORT_OPTIONS",
    "CallResult",
    "DryRun",
    "EvaluationPlan",
    "EvaluationResult",
    "PlannedCall",
    "PlannedTurn",
    "RequestFiles",
    "Run",
    "RunDirectory",
    "RunEnvironment",
    "RunProgress",
    "RunStore",
    "build_manifest",
    "cached_request_keys",
    "call_chains",
    "collect",
    "collect_systems",
    "corrected_rows",
    "default_record",
    "dry_run",
    "evaluate",
    "evaluate_async",
    "evaluate_systems",
    "evaluate_systems_async",
    "fan_out",
    "fan_out_systems",
    "load_run",
    "open_ledger",
    "plan_evaluation",
    "read_record",
    "record_ids",
    "request_files",
    "retry_errors",
    "rules_for",
    "same_run",
    "submit_files",
    "system_dirs",
    "with_gold_versions",
    "write_requests",
    "write_results",
]


def __getattr__(name: str) -> _Any:
    """``estimate``, the dry run's name before 0.1, still answers, with a warning: in this
    project an estimate is the statistical one (:mod:`judge.analysis`)."""
    if name == "estimate":
        _warnings.warn("judge.pipeline.estimate is now dry_run (an estimate is the statistical "
                      "one of judge.analysis); the old name will go", DeprecationWarning,
                      stacklevel=2)
        return dry_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
