"""``cache stats / clear``: look into or empty the reply cache."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._config import load_config
from ..store import ResponseCache
from ._report import say


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser("cache", help="inspect or clear the reply cache")
    p.add_argument("action", choices=["stats", "clear"], help="what to do")
    p.add_argument("--cache-dir", help="cache directory (default: the user cache directory)")
    p.add_argument("--config", metavar="FILE", help="JSON or TOML file of judge options")
    p.set_defaults(handler=run_cache)


def run_cache(args: argparse.Namespace, console: Console) -> int:
    config = load_config({"cache_dir": args.cache_dir}, args.config)
    cache = ResponseCache(config.cache_dir)
    try:
        if args.action == "clear":
            say(console, f"removed {cache.clear()} cached replies from {config.cache_dir}")
        else:
            stats = cache.stats()
            say(console, f"{stats['entries']} cached replies, {stats['size_bytes']} bytes, in "
                          f"{stats['directory']}")
    finally:
        cache.close()
    return 0
