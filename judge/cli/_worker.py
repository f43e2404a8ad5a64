"""``dst-judge worker``: run jobs from the service's database without serving HTTP, so that a
fleet's API replicas (``dst-judge serve --no-worker``) and its workers scale and restart apart.
Needs the ``serve`` extra, like ``serve``."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._errors import OptionError
from ._serve import _EXTRA, _settings


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser(
        "worker", help="run the service's jobs from its database (no HTTP; for a fleet of "
        "API replicas and workers on one Postgres)",
        description="Take jobs from the service's queue and run them, in supervised worker "
        "processes (one that dies is replaced at once; its jobs are taken over when their "
        "leases expire). Give it the same --db, --data-dir and --endpoints as the API "
        "replicas. SIGTERM drains: calls in flight get --grace seconds, then their jobs go "
        "back to the queue.")
    p.add_argument("--db", help="database URL: postgresql://... (or sqlite:///PATH on one "
                   "machine; env DST_JUDGE_SERVE_DB)")
    p.add_argument("--data-dir", help="data directory for run directories (default: the "
                   "user data dir; env DST_JUDGE_SERVE_DATA_DIR)")
    p.add_argument("--endpoints", metavar="FILE", help="TOML/JSON file of named model "
                   "endpoints, as for serve")
    p.add_argument("--endpoint", action="append", default=[], metavar="NAME=URL",
                   help="a named endpoint without a file (key from DST_JUDGE_KEY_<NAME>)")
    p.add_argument("--jobs", type=int, dest="job_slots", help="jobs run at once (default 4)")
    p.add_argument("--worker-processes", type=int, metavar="N",
                   help="worker processes, the job slots split among them (default: one per "
                   "4 job slots, at most one per core)")
    p.add_argument("--lease", type=float, dest="lease_seconds",
                   help="seconds before a silent worker's job is taken over (default 30)")
    p.add_argument("--grace", type=float, dest="grace_seconds",
                   help="seconds calls in flight may finish on SIGTERM (default 20)")
    p.add_argument("--batch-poll", type=float, dest="batch_poll_seconds",
                   help="seconds between two status polls of a batch job (default 30)")
    p.add_argument("--max-attempts", type=int, metavar="N",
                   help="claims of a job whose worker died while running it, before the job "
                   "is given up as failed (default 3)")
    p.add_argument("--no-listen", action="store_false", default=None, dest="listen",
                   help="poll for new jobs only (by default the worker LISTENs on Postgres "
                   "and starts a queued job at once)")
    p.add_argument("--retention-days", type=float,
                   help="delete finished jobs and ledger replies older than this")
    p.add_argument("--share-cache", action="store_true", default=None,
                   dest="share_cache_across_projects",
                   help="one reply cache for all projects (as the API replicas are set)")
    p.add_argument("--max-seconds", type=float, help="drain and stop after this many "
                   "seconds; for tests and benchmarks")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(handler=_run_worker, worker_mode="process")


def _run_worker(args: argparse.Namespace, console: Console) -> int:
    settings = _settings(args)
    if settings.job_slots < 1:
        raise OptionError("--jobs must be at least 1 for a worker")
    try:
        from ..service import run_workers
    except ImportError:
        raise OptionError(_EXTRA) from None
    return run_workers(settings, max_seconds=args.max_seconds, log_level=args.log_level)
