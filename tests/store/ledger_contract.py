"""The contract every ledger implementation keeps (the embedded SQLite one, the service's
Postgres one): subclass :class:`LedgerContract` and provide a ``make_ledger`` fixture that
returns a factory ``make_ledger(owner=None, lease=60.0)`` whose ledgers all share one store
(as processes sharing a cache directory or a database do).

    class TestPostgresLedger(LedgerContract):
        @pytest.fixture
        def make_ledger(self, postgres_url):
            ...
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from judge.store import owner_gone


def _dead_owner() -> str:
    """The owner name of a process of this host that has already ended."""
    import socket

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}/{child.pid}/dead"


class LedgerContract:
    """Behaviour shared by every :class:`judge.store.Ledger`."""

    @pytest.fixture
    def make_ledger(self):  # pragma: no cover - provided by each implementation's test class
        raise NotImplementedError

    @pytest.fixture
    def pair(self, make_ledger):
        return make_ledger(owner="host-a/1/a"), make_ledger(owner="host-b/2/b")

    def test_absent_key_has_no_reply_and_is_claimed(self, make_ledger):
        ledger = make_ledger()
        assert ledger.get("k") is None
        claim = ledger.claim("k")
        assert claim.outcome == "mine" and claim.owner == ledger.owner
        assert ledger.get("k") is None  # pending is not a reply
        assert ledger.stats()["pending"] == 1

    def test_a_recorded_reply_is_served_to_everyone(self, pair):
        a, b = pair
        assert a.claim("k").outcome == "mine"
        a.record_reply("k", b'{"id": 1}', origin="run-1")
        for ledger in (a, b):
            reply = ledger.get("k")
            assert reply.content == b'{"id": 1}' and reply.status == 200
            assert reply.origin == "run-1" and reply.key == "k"
        claim = b.claim("k")
        assert claim.outcome == "replied" and claim.reply.content == b'{"id": 1}'
        assert a.keys() == {"k"}

    def test_a_live_claim_makes_others_wait(self, pair):
        a, b = pair
        assert a.claim("k").outcome == "mine"
        busy = b.claim("k")
        assert busy.outcome == "busy" and busy.owner == a.owner
        assert busy.lease_until > time.time()
        assert a.claim("k").outcome == "mine"  # the owner itself may claim again

    def test_a_failure_is_not_served_and_is_sent_again(self, pair):
        a, b = pair
        a.claim("k")
        a.record_failure("k", "HTTP 500: busy")
        assert a.get("k") is None and a.keys() == set()
        assert a.stats()["failed"] == 1
        assert b.claim("k").outcome == "mine"

    def test_release_gives_the_request_back(self, pair):
        a, b = pair
        a.claim("k")
        a.release("k")
        assert a.stats()["pending"] == 0
        assert b.claim("k").outcome == "mine"

    def test_release_and_failure_only_touch_own_claims(self, pair):
        a, b = pair
        a.claim("k")
        b.release("k")
        b.record_failure("k", "not mine")
        assert b.claim("k").outcome == "busy"

    def test_an_expired_claim_is_taken_over(self, make_ledger):
        # leases long enough that a loaded machine cannot expire them between two statements
        a = make_ledger(owner="host-a/1/a", lease=1.0)
        b = make_ledger(owner="host-b/2/b", lease=60.0)
        a.claim("k")
        assert b.claim("k").outcome == "busy"
        time.sleep(1.2)
        assert b.claim("k").outcome == "mine"
        assert a.claim("k").outcome == "busy"  # a lost it

    def test_renew_keeps_claims_alive(self, make_ledger):
        a = make_ledger(owner="host-a/1/a", lease=1.5)
        b = make_ledger(owner="host-b/2/b")
        a.claim("k1")
        a.claim("k2")
        for _ in range(4):  # 2 s in all: past the lease unless renewed
            time.sleep(0.5)
            assert a.renew() == 2
        assert b.claim("k1").outcome == "busy"

    def test_the_claim_of_a_dead_process_is_taken_over_at_once(self, make_ledger):
        dead = _dead_owner()
        assert owner_gone(dead)
        gone = make_ledger(owner=dead, lease=3600)
        gone.claim("k")
        assert make_ledger().claim("k").outcome == "mine"

    def test_a_live_process_and_a_foreign_host_are_not_gone(self):
        import os
        import socket

        assert not owner_gone(f"{socket.gethostname()}/{os.getppid()}/x")
        assert not owner_gone(f"{socket.gethostname()}/{os.getpid()}/x")
        assert not owner_gone("elsewhere.example/1/x")
        assert not owner_gone("garbage")

    def test_refresh_claims_a_reply_and_keeps_the_one_it_replaces(self, pair):
        a, b = pair
        a.claim("k")
        a.record_reply("k", b"first", origin="r1")
        assert a.claim("k", refresh=True).outcome == "mine"
        assert b.get("k") is None and b.claim("k").outcome == "busy"
        a.record_reply("k", b"second", origin="r2")
        assert b.get("k").content == b"second"
        assert a.stats()["replaced"] == 1 and a.stats()["replies"] == 1

    def test_a_released_refresh_keeps_the_earlier_reply(self, make_ledger):
        a = make_ledger()
        a.claim("k")
        a.record_reply("k", b"first")
        a.claim("k", refresh=True)
        a.release("k")
        assert a.get("k").content == b"first"

    def test_a_reply_that_arrives_after_the_claim_was_lost_is_kept(self, make_ledger):
        a = make_ledger(owner="host-a/1/a", lease=0.01)
        b = make_ledger(owner="host-b/2/b")
        a.claim("k")
        time.sleep(0.05)
        assert b.claim("k").outcome == "mine"
        a.record_reply("k", b"late but paid")  # paid: recorded although b now sends it too
        assert b.get("k").content == b"late but paid"
        b.record_reply("k", b"b's")
        assert b.get("k").content == b"b's" and b.stats()["replaced"] == 1

    @pytest.mark.parametrize("content", [
        b"", b"\x00\x01binary\xff", "U+2028 \u2028 U+0085 \x85 ünïcode".encode(),
        b"x" * (1 << 20)], ids=["empty", "binary", "unicode", "1MB"])
    def test_reply_bytes_come_back_unchanged(self, make_ledger, content):
        ledger = make_ledger()
        ledger.claim("k")
        ledger.record_reply("k", content)
        assert ledger.get("k").content == content

    def test_status_and_keys_and_stats(self, make_ledger):
        ledger = make_ledger()
        for n in range(5):
            ledger.claim(f"k{n}")
            ledger.record_reply(f"k{n}", b"12345", status=200 + n)
        ledger.claim("pending")
        ledger.claim("failed")
        ledger.record_failure("failed", "no")
        stats = ledger.stats()
        assert (stats["replies"], stats["pending"], stats["failed"]) == (5, 1, 1)
        assert stats["reply_bytes"] == 25
        assert ledger.get("k3").status == 203
        assert ledger.keys() == {f"k{n}" for n in range(5)}

    def test_clear_removes_replies_but_not_live_claims(self, pair):
        a, b = pair
        a.claim("done")
        a.record_reply("done", b"r")
        a.claim("failed")
        a.record_failure("failed", "x")
        b.claim("in-flight")
        assert a.clear() == 2
        assert a.keys() == set() and a.get("done") is None
        assert a.claim("in-flight").outcome == "busy"

    def test_import_adds_replies_where_there_are_none(self, make_ledger):
        ledger = make_ledger()
        ledger.claim("k1")
        ledger.record_reply("k1", b"paid here")
        added = ledger.import_replies([("k1", b"old"), ("k2", b"old2")], origin="diskcache")
        assert added == 1
        assert ledger.get("k1").content == b"paid here"
        assert ledger.get("k2").content == b"old2" and ledger.get("k2").origin == "diskcache"

    def test_one_winner_when_owners_race_for_a_key(self, make_ledger):
        ledgers = [make_ledger(owner=f"racer/{n}/x") for n in range(6)]
        outcomes: list[str] = []
        barrier = threading.Barrier(len(ledgers))

        def race(ledger):
            barrier.wait()
            for key in range(30):
                outcomes.append((key, ledger.claim(f"k{key}").outcome))

        threads = [threading.Thread(target=race, args=(ledger,)) for ledger in ledgers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for key in range(30):
            mine = [o for k, o in outcomes if k == key and o == "mine"]
            assert len(mine) == 1, key
