"""The shared rate-limit pool on SQLite: at most rpm requests in any window, fair turns for a
waiting job, a provider's retry-after pausing every job, and the drain switch that stops new
requests while those in flight finish. Windows are shortened to keep the tests fast."""

from __future__ import annotations

import asyncio
import threading
import time

from judge.service.ledger._limits import EndpointPool, JobLimiter


def take(pool: EndpointPool, job: str, tokens: int = 1) -> float:
    """Ask for a slot; a granted request is answered at once (its slot ends a window later)."""
    wait, ticket = pool.try_acquire(job, tokens)
    if ticket is not None:
        pool.finished(ticket)
    return wait


def test_no_more_than_rpm_in_a_window_then_slots_free_up(db):
    pool = EndpointPool(db, "fake", rpm=3, tpm=None, window=0.5, margin=0.0)
    assert [take(pool, "a") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = take(pool, "a")
    assert 0 < wait <= 0.5
    time.sleep(wait + 0.01)
    assert take(pool, "a") == 0.0


def test_a_request_in_flight_holds_its_slot_until_a_window_after_its_answer(db):
    pool = EndpointPool(db, "fake", rpm=1, tpm=None, window=0.3, margin=0.0)
    wait, ticket = pool.try_acquire("a", 1)
    assert wait == 0.0 and ticket is not None
    time.sleep(0.4)  # longer than the window, but the request has not been answered yet
    assert 0 < take(pool, "b") <= 0.5  # still held: ask again soon
    pool.finished(ticket)
    assert 0.2 < take(pool, "b") <= 0.3  # free one window after the answer
    time.sleep(0.31)
    assert take(pool, "b") == 0.0


def test_tokens_per_minute_are_counted(db):
    pool = EndpointPool(db, "fake", rpm=None, tpm=100, window=0.5, margin=0.0)
    assert take(pool, "a", 60) == 0.0
    assert take(pool, "a", 60) > 0  # 120 > 100
    assert take(pool, "a", 40) == 0.0


def test_a_waiting_job_gets_the_next_slot_over_a_job_at_its_share(db):
    pool = EndpointPool(db, "fake", rpm=4, tpm=None, window=0.6, margin=0.0)
    assert [take(pool, "greedy") for _ in range(2)] == [0.0, 0.0]
    time.sleep(0.3)
    assert [take(pool, "greedy") for _ in range(2)] == [0.0, 0.0]
    wait = take(pool, "patient")  # full: patient now waits (and says so)
    assert 0 < wait <= 0.3
    time.sleep(wait + 0.01)  # the first two slots are free again; greedy still holds two
    assert take(pool, "greedy") > 0  # greedy holds its half while patient waits: yields
    assert take(pool, "patient") == 0.0


def test_retry_after_pauses_the_whole_pool(db):
    pool = EndpointPool(db, "fake", rpm=100, tpm=None)
    limiter = JobLimiter(pool, "a", threading.Event())
    ticket = asyncio.run(limiter.acquire(1))
    limiter.release(ticket, 429, {"retry-after": "2"})
    deadline = time.monotonic() + 5
    while take(pool, "b") == 0.0:  # the pause is written by a helper thread
        assert time.monotonic() < deadline, "the 429's pause was not written within 5 s"
        time.sleep(0.02)
    assert 1.0 < take(pool, "b") <= 2.0


def test_draining_stops_new_requests_and_counts_those_in_flight():
    draining = threading.Event()
    limiter = JobLimiter(None, "a", draining)

    async def scenario() -> bool:
        ticket = await limiter.acquire(1)
        assert limiter.in_flight == 1 and ticket is None  # no pool: nothing to give back
        draining.set()
        blocked = asyncio.ensure_future(limiter.acquire(1))
        await asyncio.sleep(0.1)
        limiter.release(ticket, 200, {})
        stuck = not blocked.done()
        blocked.cancel()
        return stuck

    assert asyncio.run(scenario())
    assert limiter.in_flight == 0 and limiter.sent == 1
