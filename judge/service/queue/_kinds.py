"""The table of job kinds: which runner runs a job, by its kind and mode. A new kind of job is a
runner (``run(job, context)``) and a line here."""

from __future__ import annotations

from ..db import JobRow
from ._analysis import AgreementRunner, AuditRunner, CompareRunner, MetricsRunner
from ._batchjob import BatchRunner
from ._evaluate import EvaluateRunner
from ._leaderboard import LeaderboardRunner
from ._runners import Runner, Toolkit

Runners = dict[tuple[str, str], Runner]
"""(kind, mode) → the runner of such jobs."""


def build_runners(tools: Toolkit) -> tuple[Runners, EvaluateRunner]:
    """Every kind's runner for one worker (sharing their caches and connection pools), and the
    evaluate runner (the worker closes its connection pools and finds run directories)."""
    evaluate = EvaluateRunner(tools)
    table: Runners = {
        ("evaluate", "live"): evaluate,
        ("retry-errors", "live"): evaluate,
        ("evaluate", "batch"): BatchRunner(tools, evaluate),
        ("metrics", "live"): MetricsRunner(tools),
        ("agreement", "live"): AgreementRunner(tools),
        ("compare", "live"): CompareRunner(tools),
        ("audit", "live"): AuditRunner(tools),
        ("leaderboard", "live"): LeaderboardRunner(tools),
    }
    return table, evaluate


def runner_for(runners: Runners, job: JobRow) -> Runner | None:
    """The runner of a job, or None for a kind this worker does not know (a newer server
    queued it)."""
    return runners.get((job.kind, job.mode or "live"))
