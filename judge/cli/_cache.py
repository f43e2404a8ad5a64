"""``cache stats / clear``: look into or empty the reply cache (the cache directory's ledger)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from .._config import load_config
from ._report import say


def add_parsers(commands: argparse._SubParsersAction[Any]) -> None:
    p = commands.add_parser("cache", help="inspect or clear the reply cache")
    p.add_argument("action", choices=["stats", "clear"], help="what to do")
    p.add_argument("--cache-dir", help="cache directory (default: the user cache directory)")
    p.add_argument("--config", metavar="FILE", help="JSON or TOML file of judge options")
    p.set_defaults(handler=run_cache)


def run_cache(args: argparse.Namespace, console: Console) -> int:
    from ..store import cache_ledger_path, clear_cache, open_cache
    config = load_config({"cache_dir": args.cache_dir}, args.config)
    if args.action == "clear":
        removed, notes = clear_cache(config.cache_dir)
        say(console, f"removed {removed} cached replies from {config.cache_dir}")
        for note in notes:
            say(console, note)
        return 0
    if not cache_ledger_path(config.cache_dir).exists() and not config.cache_dir.exists():
        say(console, f"0 cached replies (no cache in {config.cache_dir})")
        return 0
    ledger = open_cache(config.cache_dir)
    try:
        stats = ledger.stats()
    finally:
        ledger.close()
    say(console, f"{stats['replies']} cached replies ({stats['reply_bytes']} bytes; "
                  f"{stats['file_bytes']} bytes on disk), {stats['pending']} in flight, "
                  f"{stats['failed']} failed, {stats['replaced']} replaced, in "
                 f"{stats['location']}")
    return 0

