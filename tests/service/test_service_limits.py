"""The shared rate-limit pool on SQLite: at most rpm requests in any window, fair turns for a
waiting job, a provider's retry-after pausing every job, and the drain switch that stops new
requests while those in flight finish. Windows are shortened to keep the tests fast."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from judge.service import Database
from judge.service._limits import EndpointPool, JobLimiter


@pytest.fixture
def db(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'pool.db'}")
    database.migrate()
    yield database
    database.dispose()


def test_no_more_than_rpm_in_a_window_then_slots_free_up(db):
    pool = EndpointPool(db, "fake", rpm=3, tpm=None, window=0.5, margin=0.0)
    assert [pool.try_acquire("a", 1) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = pool.try_acquire("a", 1)
    assert 0 < wait <= 0.5
    time.sleep(wait + 0.01)
    assert pool.try_acquire("a", 1) == 0.0


def test_tokens_per_minute_are_counted(db):
    pool = EndpointPool(db, "fake", rpm=None, tpm=100, window=0.5, margin=0.0)
    assert pool.try_acquire("a", 60) == 0.0
    assert pool.try_acquire("a", 60) > 0  # 120 > 100
    assert pool.try_acquire("a", 40) == 0.0


def test_a_waiting_job_gets_the_next_slot_over_a_job_at_its_share(db):
    pool = EndpointPool(db, "fake", rpm=4, tpm=None, window=0.4, margin=0.0)
    for _ in range(4):
        assert pool.try_acquire("greedy", 1) == 0.0
    wait = pool.try_acquire("patient", 1)  # full: patient now waits (and says so)
    assert wait > 0
    time.sleep(wait + 0.01)
    assert pool.try_acquire("greedy", 1) > 0  # greedy holds more than its half: yields
    assert pool.try_acquire("patient", 1) == 0.0


def test_retry_after_pauses_the_whole_pool(db):
    pool = EndpointPool(db, "fake", rpm=100, tpm=None)
    limiter = JobLimiter(pool, "a", threading.Event())
    asyncio.run(limiter.acquire(1))
    limiter.release(429, {"retry-after": "2"})
    deadline = time.monotonic() + 5
    while pool.try_acquire("b", 1) == 0.0:  # the pause is written by a helper thread
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert 1.0 < pool.try_acquire("b", 1) <= 2.0


def test_draining_stops_new_requests_and_counts_those_in_flight():
    draining = threading.Event()
    limiter = JobLimiter(None, "a", draining)

    async def scenario() -> bool:
        await limiter.acquire(1)
        assert limiter.in_flight == 1
        draining.set()
        blocked = asyncio.ensure_future(limiter.acquire(1))
        await asyncio.sleep(0.1)
        limiter.release(200, {})
        stuck = not blocked.done()
        blocked.cancel()
        return stuck

    assert asyncio.run(scenario())
    assert limiter.in_flight == 0 and limiter.sent == 1
