"""The embedded ledger (SQLite, WAL): the shared contract, plus what only a file can show:
durability across processes and kill -9, racing processes, a corrupted or foreign file."""

from __future__ import annotations

import multiprocessing
import os
import signal
import uuid

import pytest

from judge._errors import StoreError
from judge.store import SQLiteLedger

from .ledger_contract import LedgerContract


class TestSQLiteFileLedger(LedgerContract):
    @pytest.fixture
    def make_ledger(self, tmp_path):
        opened = []

        def make(owner=None, lease=60.0):
            ledger = SQLiteLedger(tmp_path / "ledger.sqlite3", owner=owner, lease=lease)
            opened.append(ledger)
            return ledger

        yield make
        for ledger in opened:
            ledger.close()


class TestSQLiteMemoryLedger(LedgerContract):
    """The in-memory ledger of a run without cache and run directory."""

    @pytest.fixture
    def make_ledger(self):
        uri = f"file:ledger-{uuid.uuid4().hex}?mode=memory&cache=shared"
        opened = []

        def make(owner=None, lease=60.0):
            ledger = SQLiteLedger(uri, owner=owner, lease=lease)
            opened.append(ledger)
            return ledger

        yield make
        for ledger in opened:
            ledger.close()

    def test_one_winner_when_owners_race_for_a_key(self, make_ledger):
        pytest.skip("SQLite's shared in-memory cache locks tables, not the database: "
                    "concurrent writers are only meaningful for the file ledger")


def test_wal_mode_and_reopen_keeps_everything(tmp_path):
    path = tmp_path / "l.sqlite3"
    ledger = SQLiteLedger(path)
    ledger.claim("k")
    ledger.record_reply("k", b"paid", origin="r")
    ledger.close()
    again = SQLiteLedger(path)
    assert again.get("k").content == b"paid"
    assert again._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()


def _pay_then_die(path: str) -> None:
    ledger = SQLiteLedger(path)
    ledger.claim("paid")
    ledger.record_reply("paid", b"the reply", origin="run")
    ledger.claim("in-flight")
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_reply_committed_before_kill_9_survives(tmp_path):
    path = str(tmp_path / "l.sqlite3")
    child = multiprocessing.get_context("fork").Process(target=_pay_then_die, args=(path,))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL
    ledger = SQLiteLedger(path)
    assert ledger.get("paid").content == b"the reply"
    assert ledger.claim("in-flight").outcome == "mine"  # the dead owner's claim is taken over
    ledger.close()


def _claim_many(path: str, keys: int, queue) -> None:
    ledger = SQLiteLedger(path)
    won = [k for k in range(keys) if ledger.claim(f"k{k}").outcome == "mine"]
    for k in won:
        ledger.record_reply(f"k{k}", str(os.getpid()).encode())
    ledger.close()
    queue.put(won)


def test_processes_racing_for_the_same_keys_send_each_once(tmp_path):
    context = multiprocessing.get_context("fork")  # no re-import of judge per process
    queue = context.Queue()
    path = str(tmp_path / "l.sqlite3")
    SQLiteLedger(path).close()
    workers = [context.Process(target=_claim_many, args=(path, 150, queue)) for _ in range(4)]
    for worker in workers:
        worker.start()
    won = [queue.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    assert sorted(k for w in won for k in w) == list(range(150))
    assert SQLiteLedger(path).stats()["replies"] == 150


def test_a_corrupted_database_is_a_clear_error_and_can_be_removed(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"ledger\.sqlite3: the ledger database is unreadable "
                                         r".*cache clear"):
        SQLiteLedger(path)
    assert SQLiteLedger.remove_files(path) == [path]
    assert SQLiteLedger(path).stats()["replies"] == 0


def test_a_ledger_of_another_format_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    ledger = SQLiteLedger(path)
    ledger._db.execute("UPDATE meta SET value = '99' WHERE name = 'format'")
    ledger.close()
    with pytest.raises(StoreError, match="format 99 is not supported"):
        SQLiteLedger(path)


def test_an_unwritable_location_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create the ledger"):
        SQLiteLedger(blocker / "sub" / "ledger.sqlite3")
