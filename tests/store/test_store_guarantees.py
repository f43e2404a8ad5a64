"""Promises of the store that mutation testing (bench/mutation.py) found untested: a reply
found by a claim carries everything it was recorded with; an owner is gone only when it is a
dead (or zombie) process of this host, and asking never signals it; a reply imported from the
old diskcache cache is the chat completion it was made from, byte for byte."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import diskcache

from judge.store import SQLiteLedger, existing_claim, migrate_diskcache, owner_gone


def test_a_claim_of_a_replied_key_returns_the_reply_as_recorded(tmp_path):
    paying = SQLiteLedger(tmp_path / "ledger.db", owner="payer/1/x")
    asking = SQLiteLedger(tmp_path / "ledger.db", owner="asker/2/y")
    try:
        assert paying.claim("k").outcome == "mine"
        before = time.time()
        paying.record_reply("k", b'{"ok": 1}', status=201, origin="run-7")
        found = asking.claim("k")
        assert found.outcome == "replied" and found.reply is not None
        reply = found.reply
        assert (reply.key, reply.content, reply.status, reply.origin) == (
            "k", b'{"ok": 1}', 201, "run-7")
        assert before - 1 <= reply.recorded_at <= time.time() + 1
        assert asking.claim("k", refresh=True).outcome == "mine"  # a refresh sends again
    finally:
        paying.close()
        asking.close()


def test_a_live_claim_is_busy_until_its_lease_ends():
    now = 1000.0
    row = ("pending", "other-host/1/x", now + 5, None, None, None, now)
    busy = existing_claim("k", row, "me/2/y", now)
    assert busy is not None and busy.outcome == "busy" and busy.owner == "other-host/1/x"
    assert existing_claim("k", ("pending", "other-host/1/x", now, None, None, None, now),
                          "me/2/y", now) is None  # the lease ends at now: taken over
    assert existing_claim("k", ("pending", "other-host/1/x", None, None, None, None, now),
                          "me/2/y", now) is None


def _host() -> str:
    return socket.gethostname()


def test_an_owner_is_gone_only_when_its_process_of_this_host_ended():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while True:  # ended but not reaped: a zombie, which is gone too
            with open(f"/proc/{ended.pid}/stat", encoding="ascii") as handle:
                if handle.read().rpartition(")")[2].split()[0] == "Z":
                    break
            assert time.monotonic() < deadline, "the child did not end within 30 s"
            time.sleep(0.05)
        assert owner_gone(f"{_host()}/{ended.pid}/x")
        assert not owner_gone(f"{_host()}/{sleeper.pid}/x")
        with contextlib.suppress(subprocess.TimeoutExpired):  # a signal would end it now
            sleeper.wait(0.5)
        assert sleeper.poll() is None, "asking whether an owner is gone signalled it"
        ended.wait(10)
        assert owner_gone(f"{_host()}/{ended.pid}/x")  # reaped: no such process
        # another host's process, an owner that names no pid, this very process: not gone
        assert not owner_gone(f"elsewhere-{_host()}/{ended.pid}/x")
        assert not owner_gone(f"{_host()}/not-a-pid/x")
        assert not owner_gone(f"{_host()}/{os.getpid()}/x")
    finally:
        sleeper.kill()
        sleeper.wait(10)
        if ended.poll() is None:
            ended.wait(10)


def test_an_old_diskcache_reply_is_imported_as_the_chat_completion_it_came_from(tmp_path):
    cache = tmp_path / "cache"
    old = diskcache.Cache(str(cache))
    old.set("key-1", {"text": "naïve — café", "finish_reason": "length", "refusal": "no",
                      "model": "m-1", "response_id": "resp-1",
                      "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                "cached_prompt_tokens": 3}})
    old.set("key-2", {"text": "plain"})  # nothing else recorded: zeros and nulls
    old.set("key-3", "not a record")  # skipped
    old.close()
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    try:
        assert migrate_diskcache(cache, ledger) == 2
        first = ledger.get("key-1")
        assert first is not None and first.origin == "diskcache" and first.status == 200
        assert first.content.decode("utf-8") == json.dumps({
            "id": "resp-1", "object": "chat.completion", "model": "m-1",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "naïve — café",
                                     "refusal": "no"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                      "prompt_tokens_details": {"cached_tokens": 3}},
            "x_dst_judge_imported": "diskcache"}, ensure_ascii=False)
        second = json.loads(ledger.get("key-2").content)
        assert second["usage"] == {"prompt_tokens": 0, "completion_tokens": 0,
                                   "prompt_tokens_details": {"cached_tokens": 0}}
        assert second["id"] is None and second["model"] is None
        assert second["choices"][0]["finish_reason"] is None
        assert ledger.get("key-3") is None
        assert (cache / "cache.db.imported").exists() and not (cache / "cache.db").exists()
        assert migrate_diskcache(cache, ledger) == 0  # imported once
    finally:
        ledger.close()
