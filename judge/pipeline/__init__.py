"""The run: plan calls → answer them (live, cached, or from a Batch API file) → parse with
re-asks → filter and integrate → results; and the one reader and writer of run directories."""

from ._batch import (
    write_requests,
)
from ._evaluate import (
    CallResult,
    EvaluationPlan,
    EvaluationResult,
    PlannedCall,
    PlannedTurn,
    RunProgress,
    build_manifest,
    call_chains,
    collect,
    estimate,
    evaluate,
    evaluate_async,
    plan_evaluation,
)
from ._rundir import (
    RunDirectory,
)
from ._runs import (
    Run,
    load_run,
)

__all__ = [
    "CallResult",
    "EvaluationPlan",
    "EvaluationResult",
    "PlannedCall",
    "PlannedTurn",
    "Run",
    "RunDirectory",
    "RunProgress",
    "build_manifest",
    "call_chains",
    "collect",
    "estimate",
    "evaluate",
    "evaluate_async",
    "load_run",
    "plan_evaluation",
    "write_requests",
]
