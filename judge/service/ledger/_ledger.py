"""The service's ledger of paid model requests: :class:`judge.store.Ledger` on the service's own
database (SQLite or Postgres), so that every job and every replica of a scope shares one record
of what was claimed and paid.

Why in the database and not in a directory of each replica: two jobs of a project that send the
same request at the same moment must pay once, a replica must reuse what another one paid for,
and a reply must be durable the moment it arrives, so that ``kill -9`` of a replica costs at
most the requests that were on the wire. The scope is the project id, or :data:`SHARED_SCOPE`
when the operator shares replies across projects.

Claims are race-free without an application lock: a new key is claimed by an
``INSERT ... ON CONFLICT DO NOTHING``; an existing row is read ``FOR UPDATE`` (Postgres row
lock; SQLite serialises writers with ``BEGIN IMMEDIATE``) and taken over only when it failed,
its lease ran out or its owner process is gone.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..._errors import StoreError
from ...store import BATCH_OWNER, DEFAULT_LEASE, Claim, Reply, existing_claim, new_owner
from ..db import Database, ledger_replaced, ledger_requests

SHARED_SCOPE = "*"
"""The scope of every project's replies when ``share_cache_across_projects`` is on."""

_t = ledger_requests
_r = ledger_replaced

# The two statements of every paid request, as plain SQL that both dialects accept: compiled
# once, not built and cache-keyed per call (they run in a thread that shares the GIL with the
# event loop, and every statement is time the job waits).
_CLAIM_NEW = sa.text(
    'INSERT INTO ledger_requests (scope, "key", state, owner, lease_until, sends, created_at, '
    "updated_at) VALUES (:scope, :key, 'pending', :owner, :until, 1, :now, :now) "
    'ON CONFLICT (scope, "key") DO NOTHING RETURNING "key"')
_REPLY_CLAIMED = sa.text(
    "UPDATE ledger_requests SET state = 'replied', owner = NULL, lease_until = NULL, "
    "status = :status, content = :content, origin = :origin, error = NULL, updated_at = :now "
    'WHERE scope = :scope AND "key" = :key AND content IS NULL')


def worker_owner(worker_id: str, job_id: str) -> str:
    """A claim owner for one run of a job on a worker: ``host/pid/...`` so that a claim of a
    dead process on this host is taken over at once; one per run (a random suffix), so that
    two jobs of one worker, or a job claimed again by its own worker, wait for each other's
    requests instead of both sending them."""
    return (f"{socket.gethostname()}/{os.getpid()}/{worker_id}/{job_id}/"
            f"{secrets.token_hex(3)}")[:300]


BATCH_CLAIM_SECONDS = 26 * 3600.0
"""How long a batch job's claims last: the provider's completion window (24 h) and margin. A
batch job releases them when it collects, stops, fails or is cancelled; the lease only
matters when a job vanished without doing so."""


def batch_owner(job_id: str) -> str:
    """The owner of the claims a batch job holds on the requests it submits."""
    return f"{BATCH_OWNER}{job_id}"


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@contextlib.contextmanager
def _transaction(db: Database, write: bool, label: str) -> Iterator[sa.Connection]:
    """A ledger transaction whose database errors become a :class:`StoreError` naming
    ``label`` (its first line only: no statement or parameters)."""
    try:
        with db.write() if write else db.read() as conn:
            yield conn
    except sa.exc.SQLAlchemyError as exc:
        raise StoreError(f"{label}: {exc.__class__.__name__}: "
                         f"{str(exc).splitlines()[0][:300]}") from None


class DatabaseLedger:
    """The ledger of one scope in the service database; one instance per owner (a job)."""

    off_loop = True
    """Its methods wait on the database: async callers run them in a thread (see ModelClient)."""

    def __init__(self, db: Database, scope: str, *, owner: str | None = None,
                 lease: float = DEFAULT_LEASE) -> None:
        self.db = db
        self.scope = scope
        self.owner = owner or new_owner()
        self.lease = lease
        self.executor = db.serial
        """Where async callers run its methods: on SQLite the database's one thread for them
        (SQLite takes one writer at a time, and each write takes a fraction of a millisecond:
        one thread in turn beats many queueing for the lock and the interpreter); on Postgres
        asyncio's default pool (None), as transactions there run side by side."""
        dialect = postgresql if db.is_postgres else sqlite
        self._insert = dialect.insert

    def _tx(self, write: bool) -> contextlib.AbstractContextManager[sa.Connection]:
        return _transaction(self.db, write, f"the service's ledger ({self.scope})")

    def _row(self, key: str) -> Any:
        return sa.and_(_t.c.scope == self.scope, _t.c.key == key)

    def _locked(self, conn: sa.Connection, key: str) -> Any:
        return conn.execute(sa.select(_t.c.state, _t.c.owner, _t.c.lease_until, _t.c.content,
                                      _t.c.status, _t.c.origin, _t.c.updated_at)
                            .where(self._row(key)).with_for_update()).first()

    def _add(self, conn: sa.Connection, **values: Any) -> bool:
        """Insert a row unless the key has one; True when inserted."""
        now = values.setdefault("updated_at", time.time())
        values.setdefault("created_at", now)
        statement = self._insert(_t).values(scope=self.scope, **values)
        statement = statement.on_conflict_do_nothing(index_elements=["scope", "key"])
        return conn.execute(statement.returning(_t.c.key)).first() is not None

    def get(self, key: str) -> Reply | None:
        with self._tx(False) as conn:
            row = conn.execute(sa.select(_t.c.content, _t.c.status, _t.c.origin,
                                         _t.c.updated_at)
                               .where(self._row(key), _t.c.state == "replied")).first()
        return None if row is None else Reply(key, bytes(row[0]), row[1], row[2], row[3])

    def replies(self, keys: Iterable[str]) -> dict[str, Reply]:
        """The stored replies of these keys (those that have one), a few queries in all."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Reply] = {}
        with self._tx(False) as conn:
            for chunk in _chunks(wanted):
                for row in conn.execute(sa.select(_t.c.key, _t.c.content, _t.c.status,
                                                  _t.c.origin, _t.c.updated_at).where(
                        _t.c.scope == self.scope, _t.c.key.in_(chunk),
                        _t.c.state == "replied")):
                    found[row[0]] = Reply(row[0], bytes(row[1]), row[2], row[3], row[4])
        return found

    def claim(self, key: str, *, refresh: bool = False) -> Claim:
        with self._tx(True) as conn:
            while True:
                now = time.time()
                until = now + self.lease
                if conn.execute(_CLAIM_NEW, {"scope": self.scope, "key": key,
                                             "owner": self.owner, "until": until,
                                             "now": now}).first() is not None:
                    return Claim("mine", owner=self.owner, lease_until=until)
                row = self._locked(conn, key)
                if row is not None:
                    break  # else deleted between the two statements (a release): insert again
            held = existing_claim(key, row, self.owner, now, refresh=refresh)
            if held is not None:
                return held
            conn.execute(_t.update().where(self._row(key)).values(
                state="pending", owner=self.owner, lease_until=until, sends=_t.c.sends + 1,
                error=None, updated_at=now))
            return Claim("mine", owner=self.owner, lease_until=until)

    def record_reply(self, key: str, content: bytes, *, status: int = 200,
                     origin: str | None = None) -> None:
        values = {"state": "replied", "owner": None, "lease_until": None, "status": status,
                  "content": content, "origin": origin, "error": None}
        with self._tx(True) as conn:
            while True:
                now = time.time()
                # the usual case, one statement: a claimed (or failed) request gets its reply
                if conn.execute(_REPLY_CLAIMED, {
                        "scope": self.scope, "key": key, "status": status, "content": content,
                        "origin": origin, "now": now}).rowcount:
                    return
                row = self._locked(conn, key)
                if row is None:
                    if self._add(conn, key=key, sends=1, updated_at=now, **values):
                        return
                    continue  # inserted meanwhile by another owner: start again
                if row[3] is not None:  # a refresh or a late reply: keep the one it replaces
                    conn.execute(_r.insert().values(scope=self.scope, key=key, content=row[3],
                                                    status=row[4], origin=row[5],
                                                    recorded_at=row[6], replaced_at=now))
                conn.execute(_t.update().where(self._row(key)).values(**values, updated_at=now))
                return

    def record_failure(self, key: str, error: str) -> None:
        with self._tx(True) as conn:
            conn.execute(_t.update().where(self._row(key), _t.c.state == "pending",
                                           _t.c.owner == self.owner)
                         .values(state="failed", owner=None, lease_until=None,
                                 error=error[:2000], updated_at=time.time()))

    def release(self, key: str) -> None:
        with self._tx(True) as conn:
            mine = sa.and_(self._row(key), _t.c.state == "pending", _t.c.owner == self.owner)
            conn.execute(_t.delete().where(mine, _t.c.content.is_(None)))
            # a refreshed request keeps its earlier reply: back to replied
            conn.execute(_t.update().where(mine).values(state="replied", owner=None,
                                                        lease_until=None))

    def renew(self) -> int:
        with self._tx(True) as conn:
            return conn.execute(_t.update().where(_t.c.owner == self.owner,
                                                  _t.c.scope == self.scope,
                                                  _t.c.state == "pending")
                                .values(lease_until=time.time() + self.lease)).rowcount

    def keys(self) -> set[str]:
        with self._tx(False) as conn:
            return set(conn.execute(sa.select(_t.c.key).where(
                _t.c.scope == self.scope, _t.c.state == "replied")).scalars())

    def import_replies(self, replies: Iterable[tuple[str, bytes]], *, origin: str) -> int:
        added = 0
        with self._tx(True) as conn:
            for key, content in replies:
                added += self._add(conn, key=key, state="replied", status=200,
                                   content=content, origin=origin, sends=0)
        return added

    def claim_many(self, keys: Iterable[str], *, until: float) -> set[str]:
        """Claim, until ``until``, every key that nobody has replied to or is sending (a new
        key, a failed one, a lapsed claim, or this owner's own); returns the keys now this
        owner's. How a batch job takes the requests it will submit: another batch job leaves
        them out and waits for their replies, a live job takes them over (see
        :func:`judge.store.existing_claim`)."""
        wanted = list(dict.fromkeys(keys))
        ours: set[str] = set()
        with self._tx(True) as conn:
            moment = time.time()
            for chunk in _chunks(wanted):
                rows = [{"scope": self.scope, "key": key, "state": "pending",
                         "owner": self.owner, "lease_until": until, "sends": 1,
                         "created_at": moment, "updated_at": moment} for key in chunk]
                new = (self._insert(_t).values(rows)
                       .on_conflict_do_nothing(index_elements=["scope", "key"])
                       .returning(_t.c.key))
                ours.update(conn.execute(new).scalars())
                rest = [key for key in chunk if key not in ours]
                if not rest:
                    continue
                free = sa.or_(_t.c.state == "failed",
                              sa.and_(_t.c.state == "pending",
                                      sa.or_(_t.c.owner == self.owner,
                                             _t.c.lease_until <= moment)))
                ours.update(conn.execute(
                    _t.update().where(_t.c.scope == self.scope, _t.c.key.in_(rest), free)
                    .values(state="pending", owner=self.owner, lease_until=until,
                            sends=_t.c.sends + 1, error=None, updated_at=moment)
                    .returning(_t.c.key)).scalars())
        return ours

    def record_replies(self, replies: Iterable[tuple[str, bytes]], *, origin: str) -> None:
        """Record replies paid for outside this client (a batch's output): a key this owner
        claimed gets its reply; one without a row gets a new one; one that another owner
        holds or replied to keeps its row. This owner's claims left without a reply (their
        line failed) are marked failed, so nobody waits on them."""
        with self._tx(True) as conn:
            moment = time.time()
            for key, content in replies:
                if conn.execute(_t.update().where(
                        self._row(key), _t.c.owner == self.owner, _t.c.state == "pending")
                        .values(state="replied", owner=None, lease_until=None, status=200,
                                content=content, origin=origin, error=None,
                                updated_at=moment)).rowcount:
                    continue
                self._add(conn, key=key, state="replied", status=200, content=content,
                          origin=origin, sends=1, updated_at=moment)
            conn.execute(_t.update().where(_t.c.scope == self.scope,
                                           _t.c.owner == self.owner,
                                           _t.c.state == "pending")
                         .values(state="failed", owner=None, lease_until=None,
                                 error="the batch returned no reply", updated_at=moment))

    def release_all(self) -> int:
        """Give up every claim of this owner (a batch job that stops before its batches
        ran); returns how many."""
        with self._tx(True) as conn:
            mine = sa.and_(_t.c.scope == self.scope, _t.c.owner == self.owner,
                           _t.c.state == "pending")
            released = conn.execute(_t.delete().where(mine, _t.c.content.is_(None))).rowcount
            conn.execute(_t.update().where(mine).values(state="replied", owner=None,
                                                        lease_until=None))
        return int(released or 0)

    def count_origin(self, origin: str) -> int:
        """How many replies of the scope came from ``origin``."""
        with self._tx(False) as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(_t).where(
                _t.c.scope == self.scope, _t.c.origin == origin,
                _t.c.state == "replied")).scalar() or 0)

    def covered(self, keys: Iterable[str]) -> set[str]:
        """The keys a new request need not be sent for: replied, or claimed by another owner
        whose lease still runs (its reply is on the way). How a batch leaves out what the
        project paid for, or is paying for, already, and what it waits for before collecting."""
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        moment = time.time()
        with self._tx(False) as conn:
            for chunk in _chunks(wanted):
                found.update(conn.execute(sa.select(_t.c.key).where(
                    _t.c.scope == self.scope, _t.c.key.in_(chunk),
                    sa.or_(_t.c.state == "replied",
                           sa.and_(_t.c.state == "pending", _t.c.owner != self.owner,
                                   _t.c.lease_until > moment)))).scalars())
        return found

    def stats(self) -> dict[str, Any]:
        with self._tx(False) as conn:
            counts: dict[str, int] = dict(conn.execute(sa.select(_t.c.state, sa.func.count())
                                       .where(_t.c.scope == self.scope)
                                       .group_by(_t.c.state)).all())
            size = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(
                sa.func.length(_t.c.content)), 0)).where(
                    _t.c.scope == self.scope, _t.c.state == "replied")).scalar()
            replaced = conn.execute(sa.select(sa.func.count()).select_from(_r)
                                    .where(_r.c.scope == self.scope)).scalar()
        dialect = "postgres" if self.db.is_postgres else "sqlite"
        return {"location": f"service database ({dialect}), scope {self.scope}",
                "replies": counts.get("replied", 0), "pending": counts.get("pending", 0),
                "failed": counts.get("failed", 0), "replaced": int(replaced or 0),
                "reply_bytes": int(size or 0)}

    def clear(self) -> int:
        with self._tx(True) as conn:
            removed = conn.execute(_t.delete().where(_t.c.scope == self.scope,
                                                     _t.c.state != "pending")).rowcount
            conn.execute(_r.delete().where(_r.c.scope == self.scope))
        return removed

    def close(self) -> None:
        """Nothing to close: the engine is the service's."""


def purge_ledger(db: Database, before: float) -> int:
    """Retention: delete every scope's replies and failures last written before ``before``
    (and replies they replaced); a claim in flight is never touched. Returns rows deleted."""
    with _transaction(db, True, "the service's ledger") as conn:
        removed = conn.execute(_t.delete().where(_t.c.state != "pending",
                                                 _t.c.updated_at < before)).rowcount
        conn.execute(_r.delete().where(_r.c.replaced_at < before))
    return int(removed or 0)
