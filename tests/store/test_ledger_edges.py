"""Edges of the store that the mutation run (bench/mutation.py, group ``store``) showed no test
held: ``clear`` gives disk space back and leaves the ledger usable by other writers; removing
a broken ledger removes exactly its files; ``stats`` counts from zero and sizes the files on
disk; a cache key is stable and covers every input; the lease boundary of a claim; ``cache
clear`` removes every file of the old diskcache cache."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from judge._errors import StoreError
from judge.store import (
    BATCH_OWNER,
    LEDGER_FILE,
    SQLiteLedger,
    cache_key,
    clear_cache,
    existing_claim,
)

SIDE_FILES = ("", "-wal", "-shm")
OLD_CACHE_FILE = "cache.db"  # the diskcache database of versions before the ledger


def _on_disk(path: Path) -> int:
    """Bytes the ledger takes on disk: the database and its WAL and shared-memory files."""
    return sum(os.path.getsize(f"{path}{suffix}") for suffix in SIDE_FILES
               if os.path.exists(f"{path}{suffix}"))


@pytest.fixture
def ledger(tmp_path):
    opened = SQLiteLedger(tmp_path / LEDGER_FILE, owner="here/1/a")
    yield opened
    opened.close()


# --- clear ---------------------------------------------------------------------------------------

def test_clear_gives_the_disk_space_back(tmp_path, ledger):
    """``cache clear`` frees the disk: the database and WAL files shrink to a small fraction
    of what 4 MB of replies took (not just rows marked free inside a file of the same size)."""
    for n in range(40):
        ledger.claim(f"k{n}")
        ledger.record_reply(f"k{n}", os.urandom(100_000))
    ledger.claim("k0", refresh=True)  # a replaced reply is paid data too: it goes as well
    ledger.record_reply("k0", os.urandom(100_000))
    full = _on_disk(tmp_path / LEDGER_FILE)
    assert full > 4_000_000
    assert ledger.clear() == 40
    emptied = _on_disk(tmp_path / LEDGER_FILE)
    assert emptied < full / 20, (full, emptied)
    assert ledger.stats()["replaced"] == 0 and ledger.keys() == set()


def test_clear_keeps_live_claims_and_the_ledger_keeps_working(tmp_path, ledger):
    """A running process's claim survives a ``cache clear`` made meanwhile (it is still busy
    for others), and the ledger accepts new replies afterwards."""
    other = SQLiteLedger(tmp_path / LEDGER_FILE, owner="there/2/b")
    try:
        other.claim("in-flight")
        ledger.claim("done")
        ledger.record_reply("done", b"x" * 50_000)
        assert ledger.clear() == 1
        assert ledger.claim("in-flight").outcome == "busy"
        other.record_reply("in-flight", b"arrived after the clear")
        assert ledger.get("in-flight").content == b"arrived after the clear"
    finally:
        other.close()


def _hold_write_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    """Another process's write transaction: the database is locked for ``seconds``."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_after_clear_a_write_still_waits_for_another_writer(tmp_path, ledger):
    """After ``clear`` the ledger waits for a concurrent writer as before (its short wait for
    the space-giving step is undone): a claim made while another process holds the write lock
    for 1.5 s goes through instead of failing with 'database is locked'."""
    ledger.claim("k")
    ledger.record_reply("k", b"r")
    ledger.clear()
    locked = threading.Event()
    holder = threading.Thread(target=_hold_write_lock,
                              args=(tmp_path / LEDGER_FILE, 1.5, locked))
    holder.start()
    try:
        assert locked.wait(30)
        assert ledger.claim("next").outcome == "mine"
    finally:
        holder.join(60)
    assert not holder.is_alive()


def test_clear_does_not_stall_while_another_process_reads(tmp_path, ledger):
    """``cache clear`` during a run that is reading the ledger finishes at once (the space is
    given back later) instead of waiting out the 30 s lock timeout; the replies are gone."""
    ledger.claim("k")
    ledger.record_reply("k", b"r" * 100_000)
    reader = sqlite3.connect(tmp_path / LEDGER_FILE, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM requests").fetchone()  # a read transaction
        started = time.monotonic()
        assert ledger.clear() == 1
        assert time.monotonic() - started < 15  # the bound: far below the 30 s lock timeout
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert ledger.get("k") is None


# --- remove_files --------------------------------------------------------------------------------

def test_remove_files_deletes_the_database_and_each_side_file(tmp_path):
    """Removing a broken ledger deletes the database and its -wal, -shm and -journal files,
    says exactly which existed, and leaves other files of the directory alone."""
    path = tmp_path / LEDGER_FILE
    every = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
    for file in every:
        file.write_bytes(b"broken")
    bystanders = [tmp_path / f"{LEDGER_FILE}.bak", tmp_path / "notes.txt"]
    for file in bystanders:
        file.write_text("keep")
    assert SQLiteLedger.remove_files(path) == every
    assert not any(file.exists() for file in every)
    assert all(file.exists() for file in bystanders)


@pytest.mark.parametrize("present", [("-wal",), ("-shm",), ("-journal",), ("", "-shm")])
def test_remove_files_names_only_the_files_that_existed(tmp_path, present):
    """The list returned (``cache clear`` reports its length) holds only files that were there."""
    path = tmp_path / LEDGER_FILE
    for suffix in present:
        Path(f"{path}{suffix}").write_bytes(b"x")
    assert SQLiteLedger.remove_files(path) == [Path(f"{path}{s}") for s in present]
    assert not any(tmp_path.iterdir())


# --- stats ---------------------------------------------------------------------------------------

def test_stats_of_an_empty_ledger_are_zeros(tmp_path, ledger):
    """``cache stats`` on a new cache shows zeros, not a missing count or a one."""
    stats = ledger.stats()
    assert stats["location"] == str(tmp_path / LEDGER_FILE)
    assert {k: stats[k] for k in ("replies", "pending", "failed", "replaced", "reply_bytes")} \
        == dict.fromkeys(("replies", "pending", "failed", "replaced", "reply_bytes"), 0)


@pytest.mark.parametrize("only", ["replied", "pending", "failed"])
def test_each_count_is_zero_when_no_request_is_in_that_state(ledger, only):
    """A cache with requests in one state only counts them there and zero in the others."""
    ledger.claim("k")
    if only == "replied":
        ledger.record_reply("k", b"abc")
    elif only == "failed":
        ledger.record_failure("k", "HTTP 503")
    stats = ledger.stats()
    expected = dict.fromkeys(("replied", "pending", "failed"), 0) | {only: 1}
    assert (stats["replies"], stats["pending"], stats["failed"]) == (
        expected["replied"], expected["pending"], expected["failed"])
    assert stats["reply_bytes"] == (3 if only == "replied" else 0)


def test_reply_bytes_count_only_the_replies_served(ledger):
    """``reply_bytes`` is the size of the replies counted in ``replies``: a reply under
    refresh (being asked again) and a failure add nothing."""
    for key, size in (("a", 1000), ("b", 234), ("refreshing", 5000)):
        ledger.claim(key)
        ledger.record_reply(key, b"x" * size)
    ledger.claim("refreshing", refresh=True)
    ledger.claim("failed")
    ledger.record_failure("failed", "timeout")
    stats = ledger.stats()
    assert stats["replies"] == 2 and stats["reply_bytes"] == 1234


def test_file_bytes_are_the_database_and_its_wal_and_shm_files(tmp_path, ledger):
    """``file_bytes`` is what the ledger takes on disk, its WAL included (most of a busy
    ledger's bytes can be there before a checkpoint)."""
    for n in range(5):
        ledger.claim(f"k{n}")
        ledger.record_reply(f"k{n}", os.urandom(20_000))
    path = tmp_path / LEDGER_FILE
    assert os.path.getsize(f"{path}-wal") > 100_000  # the replies are in the WAL still
    assert ledger.stats()["file_bytes"] == _on_disk(path)
    Path(f"{path}-journal").write_bytes(b"x" * 10_000)  # not a file of a WAL database
    assert ledger.stats()["file_bytes"] == _on_disk(path)


# --- cache_key -----------------------------------------------------------------------------------

ENDPOINT = "http://127.0.0.1:8000/v1/chat/completions"
BODY = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": {
            "type": "object", "properties": {"ok": {"type": "boolean"}}}}}}


def test_the_cache_key_of_a_request_does_not_change_between_versions():
    """Keys of replies already in users' caches stay valid: the same request has the same key
    in every version (a changed derivation would silently pay again for every cached reply,
    and the import of the old diskcache cache, which keeps its keys, would find nothing). The
    value is this request's key as ledger format 1 derives it."""
    assert cache_key(ENDPOINT, BODY, "tmpl-1") == (
        "d7e9eb409920e1814faeb28cefdc3d7fd889beb514d9b6ddba441ad86a54a772")


def test_the_cache_key_ignores_the_order_of_fields():
    """The same request built with its fields in another order is the same request."""
    reordered = {key: BODY[key] for key in reversed(list(BODY))}
    reordered["response_format"] = {"json_schema": BODY["response_format"]["json_schema"],
                                    "type": "json_schema"}
    assert list(reordered) != list(BODY)
    assert cache_key(ENDPOINT, reordered, "tmpl-1") == cache_key(ENDPOINT, BODY, "tmpl-1")


@pytest.mark.parametrize("change", ["endpoint", "model", "message", "template", "schema",
                                    "no-schema"])
def test_the_cache_key_changes_with_every_input(change):
    """A reply is never served for a request that differs in endpoint, body, prompt template
    or response schema."""
    endpoint, body, template = ENDPOINT, dict(BODY), "tmpl-1"
    if change == "endpoint":
        endpoint = "http://127.0.0.1:8001/v1/chat/completions"
    elif change == "model":
        body["model"] = "m2"
    elif change == "message":
        body["messages"] = [{"role": "user", "content": "hi!"}]
    elif change == "template":
        template = "tmpl-2"
    elif change == "schema":
        body["response_format"] = {"type": "json_object"}
    else:
        del body["response_format"]
    assert cache_key(endpoint, body, template) != cache_key(ENDPOINT, BODY, "tmpl-1")


# --- the lease boundary of a claim ---------------------------------------------------------------

NOW = 1_700_000_000.0
OTHER = "other-host/1/x"  # another host: alive as far as this host can tell


def _pending(holder: str, lease_until: float | None) -> tuple:
    return ("pending", holder, lease_until, None, None, None, NOW - 10)


def test_a_claim_is_busy_up_to_the_last_instant_of_its_lease():
    """Another owner's claim holds while any of its lease is left, however little, and not at
    the instant it runs out."""
    busy = existing_claim("k", _pending(OTHER, NOW + 1e-3), "me/2/y", NOW)
    assert busy is not None and busy.outcome == "busy"
    assert (busy.owner, busy.lease_until) == (OTHER, NOW + 1e-3)
    assert existing_claim("k", _pending(OTHER, NOW), "me/2/y", NOW) is None
    assert existing_claim("k", _pending(OTHER, NOW - 1e-3), "me/2/y", NOW) is None


@pytest.mark.parametrize("now", [0.0, 0.5, NOW])
def test_a_claim_without_a_lease_has_expired_whatever_the_time(now):
    """A pending row with no lease (written by a crashed or older writer) never blocks."""
    assert existing_claim("k", _pending(OTHER, None), "me/2/y", now) is None


def test_a_claim_held_for_a_batch_never_makes_a_live_request_wait():
    """A request in a Batch API job (which may take a day) is taken over by a live run, also
    when the claim was stored by the version running before an upgrade (the owner written in
    the database is ``batch:<job id>``)."""
    assert existing_claim("k", _pending("batch:job_1", NOW + 86_400), "me/2/y", NOW) is None
    assert existing_claim("k", _pending(f"{BATCH_OWNER}job_2", NOW + 86_400), "me/2/y",
                          NOW) is None
    # an owner that merely contains the word is an ordinary owner
    assert existing_claim("k", _pending(f"host-{BATCH_OWNER}/1/x", NOW + 60), "me/2/y",
                          NOW) is not None


def test_an_owner_is_never_busy_with_its_own_claim():
    """A process asking again for a request it claimed (a retry) sends it, never waits for
    itself."""
    assert existing_claim("k", _pending("me/2/y", NOW + 60), "me/2/y", NOW) is None


def test_refresh_asks_again_despite_a_reply_but_not_over_a_live_claim():
    """``retry-errors`` sends a replied request again, yet still waits for another owner who is
    sending it right now; without refresh the stored reply is served."""
    replied = ("replied", None, None, b"paid", 200, "run-1", NOW - 5)
    assert existing_claim("k", replied, "me/2/y", NOW, refresh=True) is None
    served = existing_claim("k", replied, "me/2/y", NOW)
    assert served is not None and served.outcome == "replied"
    assert served.reply is not None and served.reply.content == b"paid"
    busy = existing_claim("k", _pending(OTHER, NOW + 60), "me/2/y", NOW, refresh=True)
    assert busy is not None and busy.outcome == "busy"
    failed = ("failed", None, None, None, None, None, NOW - 5)
    assert existing_claim("k", failed, "me/2/y", NOW) is None  # nothing paid: send again


# --- clear_cache ---------------------------------------------------------------------------------

def test_cache_clear_removes_every_file_of_the_old_diskcache_cache(tmp_path):
    """``cache clear`` deletes the old diskcache database, imported or not, with its -wal and
    -shm files, and nothing else of the directory."""
    cache = tmp_path / "cache"
    cache.mkdir()
    olds = [cache / f"{base}{suffix}" for base in (OLD_CACHE_FILE, OLD_CACHE_FILE + ".imported")
            for suffix in SIDE_FILES]
    for file in olds:
        file.write_bytes(b"old")
    (cache / "mine.txt").write_text("keep")
    removed, notes = clear_cache(cache)
    assert removed == 0
    assert [file.name for file in olds if file.exists()] == []
    assert sorted(p.name for p in cache.iterdir()) == ["mine.txt"]
    assert notes == [f"deleted the old reply cache {cache / (OLD_CACHE_FILE + '.imported')}",
                     f"deleted the old reply cache {cache / OLD_CACHE_FILE}"]


def test_cache_clear_deletes_an_unreadable_ledger_and_says_so(tmp_path):
    """A broken ledger (not SQLite) is deleted with its side files and a note naming it and
    why; the next run starts an empty ledger there. (SQLite itself may drop a side file while
    failing to open the database, hence one or two files.)"""
    cache = tmp_path / "cache"
    cache.mkdir()
    path = cache / LEDGER_FILE
    path.write_bytes(b"garbage, not SQLite" * 200)
    Path(f"{path}-shm").write_bytes(b"more garbage")
    removed, notes = clear_cache(cache)
    assert removed == 0 and len(notes) == 1
    named = re.escape(f"deleted the unreadable ledger {path} (")
    assert re.fullmatch(named + r"[12] file\(s\)\): .*the ledger database is unreadable.*",
                        notes[0]), notes
    assert not path.exists() and not Path(f"{path}-shm").exists()
    fresh = SQLiteLedger(path)
    try:
        assert fresh.stats()["replies"] == 0
    finally:
        fresh.close()


def test_cache_clear_reports_the_replies_it_removed(tmp_path):
    """The count ``cache clear`` prints is the number of cached replies it removed."""
    cache = tmp_path / "cache"
    filled = SQLiteLedger(cache / LEDGER_FILE)
    try:
        for n in range(3):
            filled.claim(f"k{n}")
            filled.record_reply(f"k{n}", b"r")
    finally:
        filled.close()
    assert clear_cache(cache) == (3, [])
    assert clear_cache(cache) == (0, [])


# --- what a claim and a failure record -----------------------------------------------------------

def test_a_new_claim_names_its_owner_and_runs_one_lease_from_now(tmp_path):
    """A claim of a new key, or of one whose request failed, is this ledger's, and its lease
    ends one lease length later: the client renews and releases by these two fields."""
    opened = SQLiteLedger(tmp_path / LEDGER_FILE, owner="here/1/a", lease=50.0)
    try:
        before = time.time()
        claim = opened.claim("k")
        after = time.time()
        assert (claim.outcome, claim.owner) == ("mine", "here/1/a")
        assert before + 50.0 <= claim.lease_until <= after + 50.0
        opened.record_failure("k", "HTTP 500")  # a failed request is claimed afresh
        before = time.time()
        again = opened.claim("k")
        assert (again.outcome, again.owner) == ("mine", "here/1/a")
        assert before + 50.0 <= again.lease_until <= time.time() + 50.0
    finally:
        opened.close()


def test_a_failure_keeps_the_first_2000_characters_of_its_error(ledger):
    ledger.claim("k")
    ledger.record_failure("k", "x" * 1999 + "yz" + "!" * 500)
    with sqlite3.connect(ledger.path) as db:
        kept = db.execute("SELECT error FROM requests WHERE key = 'k'").fetchone()[0]
    assert kept == "x" * 1999 + "y"


def test_a_reply_carries_the_moment_it_was_recorded(ledger):
    ledger.claim("k")
    before = time.time()
    ledger.record_reply("k", b"{}")
    reply = ledger.get("k")
    assert reply is not None and before <= reply.recorded_at <= time.time()


# --- owners --------------------------------------------------------------------------------------

def test_an_owner_is_host_pid_and_eight_hex_digits():
    from judge.store._ledger import _HOST, new_owner
    owner = new_owner()
    assert re.fullmatch(rf"{re.escape(_HOST)}/{os.getpid()}/[0-9a-f]{{8}}", owner)
    assert new_owner() != owner


def _process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_an_owner_is_gone_only_when_its_process_on_this_host_has_ended():
    """This process, a live child, another host and a malformed owner are not gone; a child
    that ended (reaped, or a zombie not yet reaped) is."""
    import subprocess
    import sys

    from judge.store._ledger import _HOST, owner_gone
    assert owner_gone(f"{_HOST}/{os.getpid()}/ab") is False
    assert owner_gone(f"elsewhere-{_HOST}/1/ab") is False
    assert owner_gone(f"{_HOST}/not-a-pid/ab") is False
    assert owner_gone(f"{_HOST}/1/2/3") is False  # pid 1 runs (and is another user's or ours)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert owner_gone(f"{_HOST}/{child.pid}/ab") is False
        child.kill()
        deadline = time.monotonic() + 10
        while _process_state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert owner_gone(f"{_HOST}/{child.pid}/ab") is True  # a zombie: killed, not reaped
    finally:
        child.kill()
        child.wait()
    assert owner_gone(f"{_HOST}/{child.pid}/ab") is True  # reaped: no such process


# --- opening -------------------------------------------------------------------------------------

def test_a_ledger_makes_the_folders_of_its_path(tmp_path):
    path = tmp_path / "a" / "b" / LEDGER_FILE
    opened = SQLiteLedger(path, owner="here/1/a")
    opened.close()
    assert path.is_file()


def test_a_file_uri_is_opened_as_a_uri_and_makes_no_folder(tmp_path):
    """``file:`` paths go to SQLite as URIs: two ledgers on one shared in-memory database see
    each other's replies, and no folder named after the URI appears."""
    uri = "file:edges-shared?mode=memory&cache=shared"
    first = SQLiteLedger(uri, owner="here/1/a")
    second = SQLiteLedger(uri, owner="here/1/b")
    try:
        first.claim("k")
        first.record_reply("k", b"{}")
        assert second.get("k") is not None
    finally:
        second.close()
        first.close()
    assert not Path("file:edges-shared?mode=memory&cache=shared").exists()


def test_an_unreadable_ledger_names_the_file_the_cause_and_the_cure(tmp_path):
    path = tmp_path / LEDGER_FILE
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as refused:
        SQLiteLedger(path, owner="here/1/a")
    message = str(refused.value)
    assert message.startswith(f"{path}: the ledger database is unreadable (")
    assert "file is not a database" in message
    assert message.endswith("'dst-judge cache clear' removes a broken cache database")


@pytest.mark.parametrize("error", [PermissionError, OSError])
def test_an_owner_that_cannot_be_signalled_is_not_gone(monkeypatch, error):
    """A process of another user (signalling it is not permitted) is alive, and so, to be
    safe, is one about which the system answers with any other error: only a process known
    to have ended gives its claims up before their lease runs out."""
    from judge.store import _ledger

    def refuse(pid: int, signal: int) -> None:
        raise error(1, "refused")

    monkeypatch.setattr(_ledger.os, "kill", refuse)
    assert _ledger.owner_gone(f"{_ledger._HOST}/{os.getpid() + 1}/ab") is False
