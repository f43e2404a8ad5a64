"""``dst-judge worker``: run jobs from the service's database without serving HTTP, so that a
fleet's API replicas (``dst-judge serve --no-worker``) and its workers scale and restart apart.
Needs the ``serve`` extra, like ``serve``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._errors import OptionError
from ._serve import _EXTRA, _settings, needs_extra, queue_args


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "worker", help="run the service's jobs from its database (no HTTP; for a fleet of "
        "API replicas and workers on one Postgres)",
        description="Take jobs from the service's queue and run them, in supervised worker "
        "processes (one that dies is replaced at once; its jobs are taken over when their "
        "leases expire). Give it the same --db, --data-dir and --endpoints as the API "
        "replicas. SIGTERM drains: calls in flight get --grace seconds, then their jobs go "
        "back to the queue.")
    queue_args(p)
    p.add_argument("--jobs", type=int, dest="job_slots", help="jobs run at once (default 4)")
    p.add_argument("--max-seconds", type=float, help="drain and stop after this many "
                   "seconds; for tests and benchmarks")
    p.set_defaults(handler=needs_extra(_run_worker), worker_mode="process")


def _run_worker(args: argparse.Namespace, console: Console) -> int:
    settings = _settings(args)
    if settings.job_slots < 1:
        raise OptionError("--jobs must be at least 1 for a worker")
    try:
        from ..service import run_workers
    except ImportError:
        raise OptionError(_EXTRA) from None
    return run_workers(settings, max_seconds=args.max_seconds, log_level=args.log_level)
