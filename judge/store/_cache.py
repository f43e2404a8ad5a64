"""The reply cache is the ledger of paid requests in the cache directory
(``<cache_dir>/ledger.sqlite3``), shared by every run that uses that directory.

The key covers everything that can change an answer: endpoint, model and every generation
parameter (all inside the request body), the rendered messages, the template hash and the hash
of the response schema. Re-running a finished evaluation therefore makes no model call.

Earlier versions kept parsed replies in a diskcache database (``cache.db``); :func:`open_cache`
imports them once as chat.completion replies and renames the old file to
``cache.db.imported``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from .._digest import text_digest
from .._errors import StoreError
from ._ledger import LEDGER_FILE, SQLiteLedger

OLD_CACHE_FILE = "cache.db"
"""diskcache's database file (the reply cache of dst-judge before the ledger)."""


def cache_key(endpoint: str, body: dict[str, Any], template_hash: str) -> str:
    """Stable key of one request."""
    return text_digest({
        "endpoint": endpoint,
        "body": body,
        "template_hash": template_hash,
        "response_schema_hash": text_digest(body.get("response_format") or {}),
    })


def cache_ledger_path(cache_dir: str | Path) -> Path:
    """The ledger file of a cache directory; a cache directory that is a file is refused here,
    before any command looks into it or sends a request."""
    folder = Path(cache_dir)
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder}: the cache directory is a file; pass another --cache-dir "
                         "or --no-cache")
    return folder / LEDGER_FILE


def open_cache(cache_dir: str | Path, **options: Any) -> SQLiteLedger:
    """The ledger of a cache directory (replies of an old diskcache cache imported once)."""
    ledger = SQLiteLedger(cache_ledger_path(cache_dir), **options)
    old = Path(cache_dir) / OLD_CACHE_FILE
    if old.is_file():
        try:
            migrate_diskcache(Path(cache_dir), ledger)
        except BaseException:
            ledger.close()
            raise
    return ledger


def _as_chat_completion(record: dict[str, Any]) -> bytes:
    """An old cache record (the parsed fields of a reply) as the chat.completion it came from."""
    usage = record.get("usage") or {}
    return json.dumps({
        "id": record.get("response_id"), "object": "chat.completion",
        "model": record.get("model"),
        "choices": [{"index": 0, "finish_reason": record.get("finish_reason"),
                     "message": {"role": "assistant", "content": record.get("text"),
                                 "refusal": record.get("refusal")}}],
        "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                  "completion_tokens": usage.get("completion_tokens", 0),
                  "prompt_tokens_details": {
                      "cached_tokens": usage.get("cached_prompt_tokens", 0)}},
        "x_dst_judge_imported": "diskcache",
    }, ensure_ascii=False).encode("utf-8")


def migrate_diskcache(cache_dir: Path, ledger: SQLiteLedger) -> int:
    """Import an old diskcache reply cache into ``ledger``; returns the replies imported.

    An unreadable old cache is left alone (``cache clear`` removes it).
    """
    import diskcache

    old = cache_dir / OLD_CACHE_FILE
    try:
        cache = diskcache.Cache(str(cache_dir), eviction_policy="none", size_limit=2**40)
    except Exception:  # a broken old cache must not stop a run
        return 0
    try:
        replies = []
        for key in cache.iterkeys():
            with contextlib.suppress(Exception):
                value = cache.get(key)
                if isinstance(value, dict):
                    replies.append((str(key), _as_chat_completion(value)))
        count = ledger.import_replies(replies, origin="diskcache")
    except Exception:
        return 0
    finally:
        cache.close()
    old.rename(old.with_name(OLD_CACHE_FILE + ".imported"))
    return count


def clear_cache(cache_dir: str | Path) -> tuple[int, list[str]]:
    """Empty the reply cache of ``cache_dir``: the ledger's replies (live claims of running
    processes stay) and any old diskcache files. A database that cannot be read is deleted.

    Returns the replies removed and notes on files removed.
    """
    directory = Path(cache_dir)
    notes: list[str] = []
    removed = 0
    path = cache_ledger_path(directory)
    if path.exists():
        try:
            ledger = SQLiteLedger(path)
            try:
                removed = ledger.clear()
            finally:
                ledger.close()
        except StoreError as exc:
            gone = SQLiteLedger.remove_files(path)
            notes.append(f"deleted the unreadable ledger {path} ({len(gone)} file(s)): {exc}")
    for name in (OLD_CACHE_FILE + ".imported", OLD_CACHE_FILE):
        old = directory / name
        if old.exists():
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(str(old) + suffix).unlink()
            notes.append(f"deleted the old reply cache {old}")
    return removed, notes
