"""Paid work goes through the ledger: a request is claimed before it is sent, its raw reply is
recorded before it is parsed, a re-ask keeps its concurrency slot, nothing paid is paid again
(resume, re-runs, identical requests in flight), and an invalid reply stays a paid error.

The fault server (tests/fault_server.py) counts completions per request body."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sqlite3
import threading
import time

import pytest

from judge import evaluate, load_config
from judge.errors import BudgetReached
from judge.model import ModelClient
from judge.pipeline import call_chains, plan_evaluation
from judge.store import SQLiteLedger, cache_key

from ..fault_server import FaultConfig, FaultServer


def _config(server, tmp_path, **values):
    return load_config({"model": "m", "base_url": server.url, "max_retries": 2,
                        "cache_dir": str(tmp_path / "cache"), "use_cache": False,
                        "concurrency": 4, **values})


def _completed(stats):
    return stats["completed"], stats["distinct_bodies"], stats["max_completed_per_body"]


def test_a_reask_keeps_its_slot_and_goes_before_unstarted_calls(tmp_path, example_data):
    """With one slot, each re-ask is sent right after the reply it answers; a re-ask that gave
    its slot back would queue behind every call not yet started."""
    with FaultServer(FaultConfig(rates={"invalid_once": 0.5}, seed=4)) as server:
        result = evaluate(_config(server, tmp_path, concurrency=1), *example_data)
        bodies = list(server.snapshot()["bodies"].items())  # in order of first arrival
    reasks = [(i, b["root"]) for i, (_, b) in enumerate(bodies) if b["root"]]
    assert len(reasks) >= 5 and result.summary["calls"]["reasks"] == len(reasks)
    for index, root in reasks:
        assert bodies[index - 1][0] == root, "the re-ask waited behind other calls"


def test_every_reply_is_recorded_and_a_rerun_pays_nothing(tmp_path, example_data):
    """Invalid replies (re-asked, still invalid) are paid errors in the ledger: a re-run on the
    same cache sends nothing and serves them as the same error rows, never as verdicts."""
    faults = FaultConfig(rates={"invalid": 0.2, "invalid_once": 0.2, "refusal": 0.05}, seed=2)
    with FaultServer(faults) as server:
        config = _config(server, tmp_path, use_cache=True)
        first = evaluate(config, *example_data, out_dir=tmp_path / "a")
        paid = server.snapshot()
        second = evaluate(config, *example_data, out_dir=tmp_path / "b")
        again = server.snapshot()
    assert paid["completed"] == paid["distinct_bodies"]  # nothing paid twice
    assert again["total"] == paid["total"]  # the re-run sent nothing
    assert second.summary["calls"]["cache_hits"] == paid["completed"]
    invalid = [r for r in first.rows if r["error"] and "invalid output" in r["error"]]
    assert invalid, "the seed must produce replies that stay invalid"
    assert [r["error"] for r in second.rows] == [r["error"] for r in first.rows]
    assert [r["verdict"] for r in second.rows] == [r["verdict"] for r in first.rows]
    ledger = SQLiteLedger(tmp_path / "cache" / "ledger.sqlite3")
    assert ledger.stats()["replies"] == paid["completed"]
    # each attempt names its ledger key, and the ledger holds that raw reply
    call = first.rows[0]["calls"][-1]
    for attempt in call["attempts"]:
        raw = json.loads(ledger.get(attempt["key"]).content)
        assert raw["choices"][0]["message"]["content"] == attempt["text"]
    ledger.close()


def test_resume_reuses_first_replies_whose_reask_was_pending(tmp_path, example_data):
    """The state kill -9 leaves in the re-ask phase: first replies paid and recorded, their
    re-asks claimed by a process that is gone, nothing in the run log. --resume sends the
    re-asks once and no first request again."""
    with FaultServer(FaultConfig(rates={"invalid_once": 1.0}, seed=1)) as server:
        config = _config(server, tmp_path)
        full = evaluate(config, *example_data, out_dir=tmp_path / "full")
        stats = server.snapshot()
        reask_keys = {k for k, b in stats["bodies"].items() if b["root"]}
        assert len(reask_keys) == 22 == stats["roots"]
        cut = tmp_path / "cut"
        cut.mkdir()
        shutil.copy(tmp_path / "full" / "manifest.json", cut)
        shutil.copy(tmp_path / "full" / "ledger.sqlite3", cut)
        db = sqlite3.connect(cut / "ledger.sqlite3")
        reask_rows = [key for rows in full.rows for call in rows["calls"]
                      for key in [a["key"] for a in call["attempts"][1:]]]
        db.executemany("UPDATE requests SET state = 'pending', content = NULL, "
                       "owner = 'elsewhere/1/gone', lease_until = 0 WHERE key = ?",
                       [(k,) for k in reask_rows])
        db.commit()
        db.close()
        server.stats.reset()
        resumed = evaluate(config, *example_data, out_dir=cut, resume=True)
        after = server.snapshot()
    assert set(after["bodies"]) == reask_keys  # only the re-asks, each once
    assert after["completed"] == 22
    assert resumed.summary["calls"]["recovered"] == 22  # the first replies, billed once
    assert resumed.summary["tokens"] == full.summary["tokens"]
    assert [r["verdict"] for r in resumed.rows] == [r["verdict"] for r in full.rows]


def test_identical_requests_in_flight_are_sent_once(tmp_path):
    body = {"model": "m", "messages": [{"role": "user", "content": "same"}]}

    async def both(config):
        client = ModelClient(config, ledger=SQLiteLedger(":memory:"), run_id="r")
        try:
            return await asyncio.gather(*[client.complete(body, template_hash="t")
                                          for _ in range(5)]), client
        finally:
            await client.aclose()

    with FaultServer(FaultConfig(latency=0.2)) as server:
        (answers, client) = asyncio.run(both(_config(server, tmp_path)))
        assert server.snapshot()["total"] == 1
    assert len({a.text for a in answers}) == 1
    assert [a.cached for a in answers].count(False) == 1  # billed once
    assert client.shared == 4 and client.calls == 1


def test_a_busy_claim_of_another_process_is_awaited(tmp_path):
    """Another process is sending this request: wait for its reply instead of paying again."""
    body = {"model": "m", "messages": [{"role": "user", "content": "theirs"}]}
    path = tmp_path / "ledger.sqlite3"
    other = SQLiteLedger(path, owner="other-host/1/x")
    with FaultServer(FaultConfig()) as server:
        config = _config(server, tmp_path)
        key = cache_key(config.endpoint, body, "t")
        assert other.claim(key).outcome == "mine"

        async def ask():
            client = ModelClient(config, ledger=SQLiteLedger(path), run_id="mine")
            task = asyncio.ensure_future(client.complete(body, template_hash="t"))
            await asyncio.sleep(0.3)
            assert not task.done()
            other.record_reply(key, json.dumps({"choices": [{"message": {
                "content": "from the other process"}, "finish_reason": "stop"}]}).encode())
            try:
                return await asyncio.wait_for(task, 5)
            finally:
                await client.aclose()

        answer = asyncio.run(ask())
        assert server.snapshot()["total"] == 0
    assert answer.text == "from the other process" and answer.cached


def test_a_failed_request_is_not_served_and_is_sent_again(tmp_path, example_data):
    """HTTP 500 after every retry: an error row, a failed (unpaid) ledger entry that a
    retry sends again."""
    with FaultServer(FaultConfig(rates={"http_500": 1.0}, transient_attempts=1)) as server:
        config = _config(server, tmp_path, max_retries=0, use_cache=True)
        failed = evaluate(config, *example_data)
        assert failed.summary["error_turns"] == 11 and server.snapshot()["completed"] == 0
        ledger = SQLiteLedger(tmp_path / "cache" / "ledger.sqlite3")
        assert ledger.stats()["failed"] == 22 and ledger.stats()["replies"] == 0
        ledger.close()
        again = evaluate(config, *example_data)  # attempt 2 of each body: no fault
        assert again.summary["error_turns"] == 0
        assert server.snapshot()["completed"] == 22


@pytest.mark.parametrize("secret", ["sk-LEDGER-canary-0123456789abcdef"])
def test_the_key_echoed_in_a_reply_never_reaches_the_ledger(tmp_path, secret, monkeypatch):
    """A raw reply is stored with the key scrubbed, even in fields nobody parses."""
    from judge.model._client import redact_bytes

    raw = json.dumps({"id": secret, "x": f"Bearer {secret}"}).encode()
    assert secret.encode() not in redact_bytes(raw, secret)
    assert b"<redacted>" in redact_bytes(raw, secret)


class _ThreadedLedger(SQLiteLedger):
    """The embedded ledger, but asking to be called off the event loop (as the service's
    database ledger does); it notes the threads that call it. Its one connection takes one
    call at a time (an off-loop ledger is called from several threads at once)."""

    off_loop = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads: set[int] = set()
        self._one = threading.Lock()

    def _noted(self, method, *args, **kwargs):
        self.threads.add(threading.get_ident())
        with self._one:
            return method(*args, **kwargs)

    def get(self, key):
        return self._noted(super().get, key)

    def claim(self, key, *, refresh=False):
        return self._noted(super().claim, key, refresh=refresh)

    def record_reply(self, key, content, **kwargs):
        self._noted(super().record_reply, key, content, **kwargs)

    def record_failure(self, key, error):
        self._noted(super().record_failure, key, error)

    def release(self, key):
        self._noted(super().release, key)

    def renew(self):
        return self._noted(super().renew)


def test_an_off_loop_ledger_is_called_in_threads_and_each_call_is_logged_once(
        tmp_path, example_data):
    ledger = _ThreadedLedger(tmp_path / "ledger.sqlite3")
    logged = []
    with FaultServer(FaultConfig(latency=0.01)) as server:
        result = evaluate(_config(server, tmp_path), *example_data, ledger=ledger,
                          on_result=logged.append)
        paid = server.snapshot()
    assert ledger.threads and threading.get_ident() not in ledger.threads
    assert paid["completed"] == paid["distinct_bodies"] == ledger.stats()["replies"]
    ids = [r.custom_id for r in logged]
    assert len(ids) == len(set(ids)) == result.summary["calls"]["planned"]
    ledger.close()


def test_an_off_loop_ledger_with_an_executor_of_its_own_is_called_only_there(
        tmp_path, example_data):
    """The service's SQLite ledger names one thread for its calls (SQLite takes one writer at a
    time): every call of every job runs in it, none in asyncio's default pool."""
    from concurrent.futures import ThreadPoolExecutor

    ledger = _ThreadedLedger(tmp_path / "ledger.sqlite3")
    ledger.executor = ThreadPoolExecutor(1)
    own = ledger.executor.submit(threading.get_ident).result()
    with FaultServer(FaultConfig(latency=0.01)) as server:
        result = evaluate(_config(server, tmp_path), *example_data, ledger=ledger)
        paid = server.snapshot()
    assert ledger.threads == {own}
    assert paid["completed"] == paid["distinct_bodies"] == ledger.stats()["replies"]
    assert result.summary["calls"]["failed"] == 0
    ledger.executor.shutdown()
    ledger.close()


class _TimedLedger(_ThreadedLedger):
    """Notes when each key was claimed and when its reply was recorded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.claimed: dict[str, float] = {}
        self.replied: dict[str, float] = {}

    def claim(self, key, *, refresh=False):
        claim = super().claim(key, refresh=refresh)
        self.claimed.setdefault(key, time.monotonic())
        return claim

    def record_reply(self, key, content, **kwargs):
        self.replied.setdefault(key, time.monotonic())
        super().record_reply(key, content, **kwargs)


def test_the_next_call_of_a_chain_is_claimed_while_the_current_one_is_on_the_wire(
        tmp_path, example_data):
    """With an off-loop ledger, the database round-trip of a chain's next claim overlaps the
    model's latency instead of following it; each call is still sent once."""
    ledger = _TimedLedger(tmp_path / "ledger.sqlite3")
    with FaultServer(FaultConfig(latency=0.05)) as server:
        config = _config(server, tmp_path)
        result = evaluate(config, *example_data, ledger=ledger)
        paid = server.snapshot()
    plan = plan_evaluation(config, *example_data)
    keys = {call.custom_id: cache_key(config.endpoint, call.body, call.prompt.template_hash)
            for call in plan.calls}
    early = pairs = 0
    for chain in call_chains(plan):
        calls = [plan.turns[t].calls[c] for t, c in chain]
        sent = [keys[call.custom_id] for call in calls if not call.skipped]
        for before, after in itertools.pairwise(sent):
            pairs += 1
            early += ledger.claimed[after] < ledger.replied[before]
    assert pairs >= 5 and early == pairs
    assert paid["completed"] == paid["distinct_bodies"] == result.summary["calls"]["sent"]
    assert ledger.stats()["pending"] == 0
    ledger.close()


def test_claims_taken_ahead_for_calls_a_stopped_run_never_sent_are_released(
        tmp_path, example_data):
    """A run stopped by its budget leaves no claim behind: another run may send those
    requests at once instead of waiting for a lease to run out."""
    ledger = _ThreadedLedger(tmp_path / "ledger.sqlite3")
    with FaultServer(FaultConfig(latency=0.05)) as server:
        prices = tmp_path / "prices.json"  # about 1 USD a call for the fake model "m"
        prices.write_text(json.dumps({"batch_discount": 0.5, "models": {
            "m": {"input": 1000.0, "cached_input": 1000.0, "output": 1000.0}}}))
        config = _config(server, tmp_path, budget=3.0, prices=str(prices), concurrency=2)
        with pytest.raises(BudgetReached):
            evaluate(config, *example_data, ledger=ledger, out_dir=tmp_path / "run")
        sent = server.snapshot()["completed"]
    stats = ledger.stats()
    assert sent >= 1 and stats["pending"] == 0 and stats["replies"] == sent
    ledger.close()
