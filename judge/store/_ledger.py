"""The ledger of paid work: one durable row per distinct request, claimed before it is sent and
holding the raw reply from the moment it arrives.

Why a ledger and not a cache: a model call is paid the moment the server answers, whether or
not the judge later likes the answer. The old reply cache stored a reply only after it was
parsed, and a run log recorded a call only after its re-asks ended, so a crash in between paid
again for work already done. Here every request (a first attempt or a re-ask: each is its own
request body and so its own key) goes through three committed steps::

    (absent | failed | expired claim) --claim--> pending --record_reply--> replied
                                                   |  \\--record_failure--> failed
                                                   \\--release--> absent (cancelled, budget)

* ``pending`` — a claim: ``owner`` (``host/pid/token``) is sending it; other owners wait for
  the reply instead of sending the same body. The claim lasts ``lease`` seconds and is renewed
  while its owner lives; an expired claim, or one whose owner process is gone (same host), is
  taken over.
* ``replied`` — the raw reply bytes, committed before anyone parses them. Served to every later
  request with the same key; the reader parses it again each time, so an invalid reply stays a
  paid error (a re-ask builds on it) and never becomes a valid answer by being cached.
  ``origin`` names the run that paid for it.
* ``failed`` — no reply after retries (transport error, HTTP 5xx): nothing was paid, so the next
  claim sends it again.

A refresh (``retry-errors``) may claim a replied request again; the reply it replaces moves to
``replaced``, so no paid reply is ever dropped except by :meth:`Ledger.clear`.

:class:`Ledger` is the interface (the service implements it in its database, SQLite or
Postgres: ``judge.service.ledger._ledger``; the conformance tests in ``tests/store/`` run
against any implementation); :class:`SQLiteLedger` is the embedded one
on the standard library's ``sqlite3`` in WAL mode with ``synchronous=NORMAL``: a commit reaches
the operating system before the call returns, so ``kill -9`` loses nothing committed (only a
power cut can lose the last commits).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .._errors import StoreError

LEDGER_FILE = "ledger.sqlite3"
"""File name of a ledger inside a cache or run directory."""
DEFAULT_LEASE = 60.0
"""Seconds a claim lasts unless its owner renews it (the client renews every third of it)."""
FORMAT = 1


@dataclass(frozen=True)
class Reply:
    """A paid reply as the server sent it (after key redaction)."""

    key: str
    content: bytes
    status: int
    origin: str | None
    """The run that paid for it (a run id), or None when unknown."""
    recorded_at: float


@dataclass(frozen=True)
class Claim:
    """What :meth:`Ledger.claim` decided: ``mine`` (send it now), ``replied`` (here is the paid
    reply) or ``busy`` (another live owner is sending it: wait and ask again)."""

    outcome: Literal["mine", "replied", "busy"]
    reply: Reply | None = None
    owner: str | None = None
    lease_until: float | None = None


class Ledger(Protocol):
    """The store of paid requests, shared by every run that uses the same location.

    All methods are synchronous and each commits before it returns. ``owner`` identifies this
    instance in claims (one per process and ledger). An implementation whose calls wait on a
    server (the service's, on Postgres) sets a class attribute ``off_loop = True``: the model
    client then runs its methods in threads instead of on the event loop, several at once, so
    such a ledger must be safe to call from several threads; one that names an ``executor``
    (a ``concurrent.futures.Executor``) has them run there instead.
    """

    owner: str
    lease: float

    def get(self, key: str) -> Reply | None:
        """The paid reply for ``key``, or None (pending, failed and absent requests have none)."""
        ...

    def claim(self, key: str, *, refresh: bool = False) -> Claim:
        """Claim ``key`` for sending. ``refresh`` claims a replied request too (to ask again)."""
        ...

    def record_reply(self, key: str, content: bytes, *, status: int = 200,
                     origin: str | None = None) -> None:
        """Commit a reply the moment it arrives (also when the claim was lost meanwhile)."""
        ...

    def record_failure(self, key: str, error: str) -> None:
        """No reply after retries: end this owner's claim, nothing was paid."""
        ...

    def release(self, key: str) -> None:
        """End this owner's claim without a reply (cancelled, stopped, budget)."""
        ...

    def renew(self) -> int:
        """Extend every claim of this owner by ``lease`` seconds; returns how many."""
        ...

    def keys(self) -> set[str]:
        """Keys with a paid reply."""
        ...

    def import_replies(self, replies: Iterable[tuple[str, bytes]], *, origin: str) -> int:
        """Add replies paid elsewhere (a migrated cache) where the key has none; returns count."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts: replies, pending, failed, replaced, bytes of replies, location."""
        ...

    def clear(self) -> int:
        """Remove every reply and failure (live claims stay); returns the replies removed."""
        ...

    def close(self) -> None: ...


BATCH_OWNER = "batch:"
"""How the owner of a claim held for a Batch API job starts: the request is in a batch that
may take a day, so a live request never waits for it (it takes the claim over and pays)."""


def existing_claim(key: str, row: Sequence[Any], owner: str, now: float, *,
                   refresh: bool = False) -> Claim | None:
    """What a claim of ``key`` finds in its existing row — ``(state, owner, lease_until,
    content, status, origin, updated_at)`` — when it may not take the request over: the
    stored reply, or the live claim of another owner. None: the claimant takes it (it failed,
    its lease ran out, its owner process is gone, it is held for a batch, it is the
    claimant's own, or ``refresh``). Every ledger decides by this one rule."""
    state, holder, lease_until = row[0], row[1], row[2]
    if state == "replied" and not refresh:
        return Claim("replied", Reply(key, bytes(row[3]), row[4], row[5], row[6]))
    if (state == "pending" and holder != owner and (lease_until or 0) > now
            and not owner_gone(holder) and not str(holder).startswith(BATCH_OWNER)):
        return Claim("busy", owner=holder, lease_until=lease_until)
    return None


# --- owners ------------------------------------------------------------------------------------

_HOST = socket.gethostname()


def new_owner() -> str:
    """A claim owner for this process: ``host/pid/token``."""
    return f"{_HOST}/{os.getpid()}/{secrets.token_hex(4)}"


def owner_gone(owner: str) -> bool:
    """True when ``owner`` is a process of this host that no longer runs (killed, crashed).

    Owners on other hosts, and live or unknown processes, are not gone: their claims end when
    their lease runs out.
    """
    host, _, rest = owner.partition("/")
    pid_text = rest.partition("/")[0]
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    except OSError:
        return False
    with contextlib.suppress(OSError, IndexError):  # a zombie (killed, not yet reaped) is gone
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] == "Z"
    return False


# --- SQLite ------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('pending', 'replied', 'failed')),
    owner TEXT,
    lease_until REAL,
    sends INTEGER NOT NULL DEFAULT 0,
    status INTEGER,
    content BLOB,
    origin TEXT,
    error TEXT,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS replaced (
    key TEXT NOT NULL,
    content BLOB NOT NULL,
    status INTEGER,
    origin TEXT,
    recorded_at REAL NOT NULL,
    replaced_at REAL NOT NULL
);
"""


class SQLiteLedger:
    """The embedded ledger: one SQLite database file (WAL), safe across processes.

    ``path`` ``":memory:"`` keeps a private in-memory ledger (one run, no files); a
    ``file:`` URI is passed to SQLite as such (``file:x?mode=memory&cache=shared`` shares one
    in-memory ledger between instances of a process).
    """

    def __init__(self, path: str | Path, *, lease: float = DEFAULT_LEASE,
                 owner: str | None = None) -> None:
        self.path = str(path)
        self.lease = lease
        self.owner = owner or new_owner()
        uri = self.path.startswith("file:")
        try:
            if self.path != ":memory:" and not uri:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0,
                                       check_same_thread=False, uri=uri)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create the ledger: {exc}") from None
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            found = self._db.execute("SELECT value FROM meta WHERE name='format'").fetchone()
            if found is None:
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)",
                                 (str(FORMAT),))
            elif found[0] != str(FORMAT):
                self._db.close()
                raise StoreError(f"{self.path}: ledger format {found[0]} is not supported by "
                                 f"this version (format {FORMAT}); use a newer dst-judge or "
                                 "clear the cache")
        except sqlite3.Error as exc:
            self._db.close()
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: Exception) -> StoreError:
        return StoreError(f"{self.path}: the ledger database is unreadable ({exc}); "
                          "'dst-judge cache clear' removes a broken cache database")

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (no lock upgrade deadlocks between processes)."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None

    def get(self, key: str) -> Reply | None:
        try:
            row = self._db.execute(
                "SELECT content, status, origin, updated_at FROM requests "
                "WHERE key = ? AND state = 'replied'", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None
        return None if row is None else Reply(key, bytes(row[0]), row[1], row[2], row[3])

    def claim(self, key: str, *, refresh: bool = False) -> Claim:
        now = time.time()
        until = now + self.lease
        with self._write() as db:
            row = db.execute("SELECT state, owner, lease_until, content, status, origin, "
                             "updated_at FROM requests WHERE key = ?", (key,)).fetchone()
            if row is None:
                db.execute("INSERT INTO requests (key, state, owner, lease_until, sends, "
                           "updated_at) VALUES (?, 'pending', ?, ?, 1, ?)",
                           (key, self.owner, until, now))
                return Claim("mine", owner=self.owner, lease_until=until)
            held = existing_claim(key, row, self.owner, now, refresh=refresh)
            if held is not None:
                return held
            db.execute("UPDATE requests SET state = 'pending', owner = ?, lease_until = ?, "
                       "sends = sends + 1, error = NULL, updated_at = ? WHERE key = ?",
                       (self.owner, until, now, key))
            return Claim("mine", owner=self.owner, lease_until=until)

    def record_reply(self, key: str, content: bytes, *, status: int = 200,
                     origin: str | None = None) -> None:
        now = time.time()
        with self._write() as db:
            db.execute("INSERT INTO replaced (key, content, status, origin, recorded_at, "
                       "replaced_at) SELECT key, content, status, origin, updated_at, ? "
                       "FROM requests WHERE key = ? AND content IS NOT NULL", (now, key))
            db.execute("INSERT INTO requests (key, state, status, content, origin, sends, "
                       "updated_at) VALUES (?, 'replied', ?, ?, ?, 1, ?) "
                       "ON CONFLICT (key) DO UPDATE SET state = 'replied', owner = NULL, "
                       "lease_until = NULL, status = excluded.status, "
                       "content = excluded.content, origin = excluded.origin, error = NULL, "
                       "updated_at = excluded.updated_at",
                       (key, status, sqlite3.Binary(content), origin, now))

    def record_failure(self, key: str, error: str) -> None:
        with self._write() as db:
            db.execute("UPDATE requests SET state = 'failed', owner = NULL, lease_until = NULL, "
                       "error = ?, updated_at = ? WHERE key = ? AND state = 'pending' "
                       "AND owner = ?", (error[:2000], time.time(), key, self.owner))

    def release(self, key: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM requests WHERE key = ? AND state = 'pending' AND owner = ? "
                       "AND content IS NULL", (key, self.owner))
            # a refreshed request keeps its earlier reply: back to replied
            db.execute("UPDATE requests SET state = 'replied', owner = NULL, lease_until = NULL "
                       "WHERE key = ? AND state = 'pending' AND owner = ?", (key, self.owner))

    def renew(self) -> int:
        with self._write() as db:
            return db.execute("UPDATE requests SET lease_until = ? WHERE state = 'pending' "
                              "AND owner = ?", (time.time() + self.lease, self.owner)).rowcount

    def keys(self) -> set[str]:
        try:
            return {k for (k,) in self._db.execute(
                "SELECT key FROM requests WHERE state = 'replied'")}
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None

    def import_replies(self, replies: Iterable[tuple[str, bytes]], *, origin: str) -> int:
        now = time.time()
        with self._write() as db:
            before = db.total_changes
            db.executemany("INSERT OR IGNORE INTO requests (key, state, status, content, "
                           "origin, sends, updated_at) VALUES (?, 'replied', 200, ?, ?, 0, ?)",
                           ((k, sqlite3.Binary(c), origin, now) for k, c in replies))
            return db.total_changes - before

    def stats(self) -> dict[str, Any]:
        try:
            counts = dict(self._db.execute(
                "SELECT state, COUNT(*) FROM requests GROUP BY state").fetchall())
            size = self._db.execute("SELECT COALESCE(SUM(LENGTH(content)), 0) FROM requests "
                                    "WHERE state = 'replied'").fetchone()[0]
            replaced = self._db.execute("SELECT COUNT(*) FROM replaced").fetchone()[0]
        except sqlite3.Error as exc:
            raise self._unreadable(exc) from None
        files = [Path(self.path + suffix) for suffix in ("", "-wal", "-shm")]
        return {"location": self.path, "replies": counts.get("replied", 0),
                "pending": counts.get("pending", 0), "failed": counts.get("failed", 0),
                "replaced": replaced, "reply_bytes": int(size),
                "file_bytes": sum(f.stat().st_size for f in files if f.is_file())}

    def clear(self) -> int:
        with self._write() as db:
            removed = db.execute("DELETE FROM requests WHERE state != 'pending'").rowcount
            db.execute("DELETE FROM replaced")
        with contextlib.suppress(sqlite3.Error):  # give the space back unless others read now
            self._db.execute("PRAGMA busy_timeout = 500")
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA busy_timeout = 30000")
        return removed

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()

    @staticmethod
    def remove_files(path: str | Path) -> list[Path]:
        """Delete a ledger database and its WAL files (a broken cache); returns what existed."""
        removed = []
        for suffix in ("", "-wal", "-shm", "-journal"):
            file = Path(str(path) + suffix)
            if file.exists():
                file.unlink()
                removed.append(file)
        return removed
