"""``cache stats / clear``: look into or empty the reply cache."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from .._config import load_config
from .._errors import InputError
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
    if args.action == "clear":
        return _clear(config.cache_dir, console)
    cache = ResponseCache(config.cache_dir)
    try:
        stats = cache.stats()
        say(console, f"{stats['entries']} cached replies, {stats['size_bytes']} bytes, in "
                     f"{stats['directory']}")
    finally:
        cache.close()
    return 0


def _clear(directory: Path, console: Console) -> int:
    """Empty the cache; a damaged database (one that no longer opens or reads) is removed."""
    try:
        cache = ResponseCache(directory)
    except InputError as exc:
        if not (directory / "cache.db").is_file():
            raise
        reason = exc.reason
    else:
        try:
            say(console, f"removed {cache.clear()} cached replies from {directory}")
            return 0
        except InputError as exc:
            reason = exc.reason
        finally:
            cache.close()
    ResponseCache.remove(directory)
    say(console, f"removed the damaged reply cache in {directory} ({reason.split(';')[0]})")
    return 0
