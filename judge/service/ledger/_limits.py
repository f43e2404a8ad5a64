"""One rate-limit pool per endpoint, shared by every job on every replica, kept in the database.

The pool is a sliding log: each request that goes out leaves a row ``(endpoint, at, done_at,
tokens, job)``; a request may go when fewer than ``rpm`` rows (and fewer than ``tpm``
estimated tokens) hold a slot. The check and the insert happen in one transaction that holds the
pool's row lock (``SELECT ... FOR UPDATE`` on Postgres, the single writer on SQLite), so two
replicas can never both take the last slot.

A request holds its slot from its grant until a minute after its response (or failure):
wherever in between it reached the provider, every one-minute window of arrivals holds at
most ``rpm`` of them, even when a busy replica sends a granted request late.

Fairness: a job that has to wait leaves a waiter row. While other jobs wait, a job that
already holds its share (``rpm`` divided by the jobs competing) of the last minute's slots
yields the next free slot to them; with nobody waiting, one job may use the whole pool.
``retry-after`` and ``x-ratelimit-remaining-* = 0`` pause the whole pool until the reset.

:class:`JobLimiter` is what one job's model client sees (``judge.model.SharedLimiter``): it
asks the pool before every request and counts calls in flight; when the worker drains (SIGTERM)
it stops letting new requests out while those in flight finish.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa

from ..db import Database, now, rate_events, rate_pools, rate_waiters

WINDOW = 60.0
MARGIN = 0.5
MAX_PAUSE = 120.0
MAX_FLIGHT = 900.0
"""A request with no end after this long (its replica died) stops holding a slot."""
IN_FLIGHT_POLL = 0.5
_Events = Sequence[sa.Row[Any, Any, Any, Any]]
"""Rows of ``rate_events``: ``at``, ``done_at``, ``tokens``, ``job_id``."""
_WRITES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dst-judge-pool")


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    text = value.strip().lower()
    try:
        number = float(text.removesuffix("ms").removesuffix("s"))
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number / 1000 if text.endswith("ms") else number


class EndpointPool:
    """The shared limits of one endpoint (a no-op when it has neither rpm nor tpm)."""

    def __init__(self, db: Database, endpoint: str, *, rpm: int | None, tpm: int | None,
                 window: float = WINDOW, margin: float = MARGIN) -> None:
        self.db = db
        self.endpoint = endpoint
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.margin = margin
        self.granted = 0
        self._ensure_row()

    @property
    def limited(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _ensure_row(self) -> None:
        """The pool's row, made by whichever worker comes first (two that start together
        may both find none: the second one's insert then loses, harmlessly)."""
        try:
            with self.db.write() as conn:
                found = conn.execute(sa.select(rate_pools.c.endpoint)
                                     .where(rate_pools.c.endpoint == self.endpoint)).first()
                if found is None:
                    conn.execute(rate_pools.insert().values(endpoint=self.endpoint,
                                                            paused_until=0.0))
        except sa.exc.IntegrityError:
            pass  # another process inserted it meanwhile

    def try_acquire(self, job_id: str, tokens: int) -> tuple[float, int | None]:
        """Take a slot for one request: ``(0, ticket)`` when granted, else ``(seconds to wait
        before asking again, None)``. Give the ticket back to :meth:`finished`."""
        with self.db.write() as conn:
            row = conn.execute(sa.select(rate_pools.c.paused_until, self._clock())
                               .where(rate_pools.c.endpoint == self.endpoint)
                               .with_for_update()).first()
            paused, moment = (row[0] or 0.0, float(row[1])) if row is not None else (0.0, now())
            if paused > moment:
                return paused - moment, None
            span = self.window + self.margin
            conn.execute(rate_events.delete().where(
                rate_events.c.endpoint == self.endpoint,
                sa.or_(rate_events.c.done_at < moment - span,
                       rate_events.c.at < moment - MAX_FLIGHT)))
            events = conn.execute(sa.select(rate_events.c.at, rate_events.c.done_at,
                                            rate_events.c.tokens, rate_events.c.job_id)
                                  .where(rate_events.c.endpoint == self.endpoint)).all()
            wait = self._wait(events, tokens, moment, span)
            if wait > 0:
                self._waiting(conn, job_id, moment + wait + 2.0)
                return wait, None
            if self.rpm and self._over_share(conn, job_id, events, moment):
                self._waiting(conn, job_id, moment + 3.0)
                return 0.25, None
            ticket = conn.execute(rate_events.insert().values(
                endpoint=self.endpoint, at=moment, tokens=tokens, job_id=job_id)
                .returning(rate_events.c.id)).scalar_one()
            conn.execute(rate_waiters.delete().where(rate_waiters.c.endpoint == self.endpoint,
                                                     rate_waiters.c.job_id == job_id))
        self.granted += 1
        return 0.0, int(ticket)

    def finished(self, ticket: int) -> None:
        """The request of ``ticket`` ended: its slot frees one window after now."""
        with self.db.write() as conn:
            conn.execute(rate_events.update().where(rate_events.c.id == ticket)
                         .values(done_at=self._clock()))

    def _clock(self) -> Any:
        """The time every replica agrees on: the database server's clock on Postgres (replicas
        on several machines may disagree by seconds), this machine's on SQLite."""
        if self.db.is_postgres:
            return sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), sa.Float)
        return sa.literal(now(), sa.Float)

    def _wait(self, events: _Events, tokens: int, moment: float, span: float) -> float:
        """Seconds until enough slots free up. A request holds its slot from its grant until
        one window after its response, so wherever in between it reached the provider, no
        window of arrivals holds more than the limit. Slots of requests still in flight have
        no end yet: ask again soon."""
        ends = sorted((e.done_at + span if e.done_at is not None else math.inf, e.tokens)
                      for e in events)
        wait = 0.0
        if self.rpm and len(ends) >= self.rpm:
            wait = ends[len(ends) - self.rpm][0] - moment
        if self.tpm:
            need = sum(t for _, t in ends) + min(tokens, self.tpm) - self.tpm
            for end, used in ends:
                if need <= 0:
                    break
                need -= used
                wait = max(wait, end - moment)
        return min(max(wait, 0.0), IN_FLIGHT_POLL) if math.isinf(wait) else max(wait, 0.0)

    def _over_share(self, conn: sa.Connection, job_id: str, events: _Events,
                    moment: float) -> bool:
        others = {r.job_id for r in conn.execute(
            sa.select(rate_waiters.c.job_id).where(rate_waiters.c.endpoint == self.endpoint,
                                                   rate_waiters.c.until > moment,
                                                   rate_waiters.c.job_id != job_id))}
        if not others:
            return False
        share = math.ceil(self.rpm / (len(others) + 1)) if self.rpm else 0
        mine = sum(1 for e in events if e.job_id == job_id)
        return mine >= share

    def _waiting(self, conn: sa.Connection, job_id: str, until: float) -> None:
        conn.execute(rate_waiters.delete().where(rate_waiters.c.endpoint == self.endpoint,
                                                 rate_waiters.c.job_id == job_id))
        conn.execute(rate_waiters.insert().values(endpoint=self.endpoint, job_id=job_id,
                                                  until=until))

    def pause(self, seconds: float) -> None:
        """Stop every replica sending to this endpoint for ``seconds`` (the provider asked)."""
        with self.db.write() as conn:
            until = float(conn.execute(sa.select(self._clock())).scalar_one()) + min(seconds,
                                                                                      MAX_PAUSE)
            conn.execute(rate_pools.update().where(rate_pools.c.endpoint == self.endpoint,
                                                   rate_pools.c.paused_until < until)
                         .values(paused_until=until))


class JobLimiter:
    """One job's view of its endpoint's pool, plus the drain switch of its worker."""

    def __init__(self, pool: EndpointPool | None, job_id: str,
                 draining: threading.Event) -> None:
        self.pool = pool
        self.job_id = job_id
        self.draining = draining
        self.in_flight = 0
        self.sent = 0

    async def acquire(self, tokens: int) -> Any:
        ticket = None
        while True:
            if self.draining.is_set():
                await asyncio.Event().wait()  # never again: the job is handed back
            if self.pool is None or not self.pool.limited:
                break
            wait, ticket = await asyncio.to_thread(self.pool.try_acquire, self.job_id, tokens)
            if wait <= 0:
                break
            await asyncio.sleep(min(wait, 5.0) + random.uniform(0, 0.05))
        self.in_flight += 1
        self.sent += 1
        return ticket

    def release(self, ticket: Any, status: int | None, headers: Mapping[str, str]) -> None:
        self.in_flight -= 1
        if self.pool is None:
            return
        if ticket is not None:
            _WRITES.submit(self.pool.finished, ticket)
        pause = None
        if status == 429:
            pause = _seconds(headers.get("retry-after"))
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            reset = _seconds(headers.get(f"x-ratelimit-reset-{kind}"))
            if remaining is not None and remaining.strip() == "0" and reset is not None:
                pause = max(pause or 0.0, reset)
        if pause:
            _WRITES.submit(self.pool.pause, pause)
