"""On-disk cache of model replies (diskcache, eviction off).

The key covers everything that can change an answer: endpoint, model and every generation
parameter (all inside the request body), the rendered messages, the template hash and the hash
of the response schema. Re-running a finished evaluation therefore makes no model call.

The cache is a convenience, never the record of paid work (the run log is): a damaged cache
database stops a command with a message saying how to clear it (``dst-judge cache clear``
removes even a database that no longer opens), an entry that cannot be read is a miss, and a
failed write leaves the run going with the cache switched off.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import diskcache

from .._digest import text_digest
from .._errors import InputError

_DATABASE = "cache.db"
_VALUE_DIR = re.compile(r"[0-9a-f]{2}")


def cache_key(endpoint: str, body: dict[str, Any], template_hash: str) -> str:
    """Stable key of one request."""
    return text_digest({
        "endpoint": endpoint,
        "body": body,
        "template_hash": template_hash,
        "response_schema_hash": text_digest(body.get("response_format") or {}),
    })


def _damaged(directory: Path, exc: BaseException) -> InputError:
    return InputError(f"the reply cache is damaged ({exc}); run 'dst-judge cache clear "
                      f"--cache-dir {directory}' or pass --no-cache", path=directory / _DATABASE)


class ResponseCache:
    """A persistent map from request key to the recorded completion."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.writable = True
        try:
            self._cache = diskcache.Cache(str(self.directory), eviction_policy="none",
                                          size_limit=2**40)
        except sqlite3.Error as exc:
            raise _damaged(self.directory, exc) from None
        except OSError as exc:
            raise InputError(f"cannot open the reply cache: {exc.strerror or exc}",
                             path=self.directory) from None

    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key``; None when absent or unreadable (a damaged entry is a
        miss: the call is made again rather than the run stopped)."""
        try:
            value = self._cache.get(key)
        except Exception:
            return None
        return value if isinstance(value, dict) else None

    def set(self, key: str, record: dict[str, Any]) -> None:
        """Store a record; if the cache cannot be written, stop writing to it (the run goes
        on: its log, not the cache, records paid work)."""
        if not self.writable:
            return
        try:
            self._cache.set(key, record)
        except (sqlite3.Error, OSError):
            self.writable = False

    def keys(self) -> set[str]:
        try:
            return {str(k) for k in self._cache.iterkeys()}
        except sqlite3.Error as exc:
            raise _damaged(self.directory, exc) from None

    def stats(self) -> dict[str, Any]:
        try:
            return {"directory": str(self.directory), "entries": len(self._cache),
                    "size_bytes": self._cache.volume()}
        except sqlite3.Error as exc:
            raise _damaged(self.directory, exc) from None

    def clear(self) -> int:
        try:
            return self._cache.clear()
        except sqlite3.Error as exc:
            raise _damaged(self.directory, exc) from None

    def close(self) -> None:
        self._cache.close()

    @staticmethod
    def remove(directory: str | Path) -> int:
        """Delete the cache's own files in ``directory`` (the database, its journal files and
        value folders), also when the database no longer opens; returns how many entries
        the database held, or -1 when it could not be read."""
        folder = Path(directory)
        entries = -1
        try:
            with diskcache.Cache(str(folder)) as cache:
                entries = len(cache)
        except (sqlite3.Error, OSError):
            pass
        for name in (_DATABASE, f"{_DATABASE}-wal", f"{_DATABASE}-shm"):
            (folder / name).unlink(missing_ok=True)
        if folder.is_dir():
            for child in folder.iterdir():
                if child.is_dir() and _VALUE_DIR.fullmatch(child.name):
                    shutil.rmtree(child, ignore_errors=True)
        return entries
