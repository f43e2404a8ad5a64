"""The ``dst-judge`` command line: build the parser from one module per command group, run the
chosen command, and turn the one exception tree into messages and exit statuses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from .._errors import BudgetReached, DSTJudgeError, ExitStatus, RunInterrupted, exit_status_for
from .._io import printable
from .._version import __version__
from . import (
    _agreement,
    _analysis,
    _audit,
    _batch,
    _cache,
    _convert,
    _corrections,
    _evaluate,
    _labels,
    _leaderboard,
    _local,
    _metrics,
    _remote,
    _serve,
    _tables,
    _worker,
)

COMMAND_GROUPS = (_evaluate.add_parsers, _metrics.add_parsers, _tables.add_parser,
                  _leaderboard.add_parsers,
                  _batch.add_parsers, _agreement.add_parsers, _analysis.add_parsers,
                  _audit.add_parsers, _corrections.add_parsers, _labels.add_parsers,
                  _convert.add_parser, _cache.add_parsers, _local.add_local_parser,
                  _serve.add_parser, _worker.add_parser, _remote.add_parsers)
"""One function per command module adds its commands, in help order."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dst-judge", description="Evaluate dialogue state tracking: LLM judge and "
        "exact-match metrics.")
    parser.add_argument("--version", action="version", version=f"dst-judge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_commands in COMMAND_GROUPS:
        add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    try:
        return args.handler(args, console)
    except BudgetReached as exc:
        print(f"dst-judge: {exc}; finished calls are logged in the run directory: raise "
              "--budget and pass --resume to continue", file=sys.stderr)
        return int(exit_status_for(exc))
    except RunInterrupted as exc:
        print(f"dst-judge: {exc}", file=sys.stderr)
        return int(exit_status_for(exc))
    except DSTJudgeError as exc:
        print(f"dst-judge: error: {printable(exc)}", file=sys.stderr)
        return int(exit_status_for(exc))
    except KeyboardInterrupt:
        print("dst-judge: interrupted", file=sys.stderr)
        return int(ExitStatus.INTERRUPTED)
