"""Edges of the service's database ledger (judge.service.ledger._ledger), in-process: every
write takes the database's one-writer discipline (on SQLite the process's writer lock) and no
read does; the exact rows a batch's replies, a released batch, a late reply and a retry leave;
stats; errors named by the ledger's scope. (The guard's edges are in
``tests/service/http/test_guard_edges.py``.)"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from judge._errors import StoreError
from judge.service import Database
from judge.service.db._db import ledger_replaced, ledger_requests
from judge.service.ledger._ledger import DatabaseLedger, batch_owner, purge_ledger

# --- the ledger ----------------------------------------------------------------------------


@pytest.fixture
def db(module_database_url: str) -> Iterator[Database]:
    """The module's migrated database (tests/service/conftest.py), opened for this test."""
    database = Database(module_database_url)
    yield database
    database.dispose()


def _ledger(db: Database, owner: str = "job-1", lease: float = 60.0) -> DatabaseLedger:
    return DatabaseLedger(db, uuid.uuid4().hex[:12], owner=owner, lease=lease)


def _rows(db: Database, scope: str) -> dict[str, dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(sa.select(ledger_requests).where(
            ledger_requests.c.scope == scope)).mappings().all()
    return {row["key"]: dict(row) for row in rows}


def _replaced(db: Database, scope: str) -> list[dict[str, Any]]:
    with db.read() as conn:
        return [dict(r) for r in conn.execute(sa.select(ledger_replaced).where(
            ledger_replaced.c.scope == scope).order_by(ledger_replaced.c.id)).mappings()]


WRITES = {
    "claim": lambda led: led.claim("k"),
    "record_reply": lambda led: led.record_reply("k", b"r"),
    "record_failure": lambda led: led.record_failure("k", "boom"),
    "release": lambda led: led.release("k"),
    "renew": lambda led: led.renew(),
    "import_replies": lambda led: led.import_replies([("k", b"r")], origin="o"),
    "claim_many": lambda led: led.claim_many(["k"], until=time.time() + 60),
    "record_replies": lambda led: led.record_replies([("k", b"r")], origin="o"),
    "release_all": lambda led: led.release_all(),
    "clear": lambda led: led.clear(),
}

READS = {
    "get": lambda led: led.get("k"),
    "replies": lambda led: led.replies(["k"]),
    "keys": lambda led: led.keys(),
    "count_origin": lambda led: led.count_origin("o"),
    "covered": lambda led: led.covered(["k"]),
    "stats": lambda led: led.stats(),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_ledger_write_waits_for_the_sqlite_writer(db, name):
    """SQLite takes one writer: a ledger write queues on the process's writer lock (a read
    transaction that then writes would fail on upgrade instead of waiting)."""
    ledger = _ledger(db)
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            WRITES[name](ledger)
        except BaseException as exc:
            errors.append(exc)
        done.set()

    with db._writer:
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        assert not done.wait(0.15), f"{name} wrote without the writer lock"
    assert done.wait(10) and errors == []


@pytest.mark.parametrize("name", sorted(READS))
def test_no_ledger_read_waits_for_the_writer(db, name):
    ledger = _ledger(db)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (READS[name](ledger), done.set()), daemon=True)
    with db._writer:
        worker.start()
        assert done.wait(10), f"{name} waited for the writer lock"


def test_a_batch_s_replies_land_on_its_claims_and_its_other_claims_fail(db):
    """record_replies: a claimed key becomes a clean reply (status 200, no owner, lease or
    error); a key without a row gets one; the owner's claims with no reply become failures
    nobody waits on; another owner's claim is left as it is."""
    owner = batch_owner("job-b")
    batch = _ledger(db, owner=owner)
    other = DatabaseLedger(db, batch.scope, owner="live")
    other.claim("theirs")
    other.claim("failed-before")
    other.record_failure("failed-before", "HTTP 500")
    until = time.time() + 3600
    assert batch.claim_many(["a", "lost", "failed-before"], until=until) == {
        "a", "lost", "failed-before"}
    before = time.time()
    batch.record_replies([("a", b"A"), ("fresh", b"F"), ("theirs", b"T")], origin="batch:b")
    after = time.time()
    rows = _rows(db, batch.scope)
    for key, content in (("a", b"A"), ("fresh", b"F")):
        row = rows[key]
        assert (row["state"], row["owner"], row["lease_until"], row["status"], row["content"],
                row["origin"], row["error"]) == ("replied", None, None, 200, content,
                                                 "batch:b", None)
        assert before <= row["updated_at"] <= after
    assert rows["a"]["sends"] == 1 and rows["fresh"]["sends"] == 1
    for key in ("lost", "failed-before"):
        row = rows[key]
        assert (row["state"], row["owner"], row["lease_until"], row["error"]) == (
            "failed", None, None, "the batch returned no reply")
        assert before <= row["updated_at"] <= after
    assert rows["theirs"]["state"] == "pending" and rows["theirs"]["owner"] == "live"
    assert rows["theirs"]["content"] is None
    assert batch.get("fresh").status == 200


def test_a_batch_s_replies_and_release_stay_in_its_scope(db):
    """One owner holding claims in two scopes: replies, failures, releases and renewals in
    one scope leave the other's claims alone."""
    owner = batch_owner("job-s")
    here, there = _ledger(db, owner=owner), _ledger(db, owner=owner)
    until = time.time() + 3600
    here.claim_many(["h"], until=until)
    there.claim_many(["t1", "t2"], until=until)
    here.record_replies([("h", b"H")], origin="o")
    assert here.release_all() == 0
    assert {k: r["state"] for k, r in _rows(db, there.scope).items()} == {
        "t1": "pending", "t2": "pending"}
    assert there.renew() == 2 and here.renew() == 0
    assert there.release_all() == 2 and _rows(db, there.scope) == {}


def test_a_released_batch_gives_back_its_claims_and_keeps_earlier_replies(db):
    batch = _ledger(db, owner=batch_owner("job-r"))
    batch.import_replies([("old", b"paid")], origin="o")
    until = time.time() + 3600
    assert batch.claim_many(["n1", "n2"], until=until) == {"n1", "n2"}
    assert batch.claim("old", refresh=True).outcome == "mine"
    other = DatabaseLedger(db, batch.scope, owner="x")
    other.claim("foreign")
    assert batch.release_all() == 2
    rows = _rows(db, batch.scope)
    assert set(rows) == {"old", "foreign"}
    assert (rows["old"]["state"], rows["old"]["owner"], rows["old"]["lease_until"],
            rows["old"]["content"]) == ("replied", None, None, b"paid")
    assert rows["foreign"]["state"] == "pending" and rows["foreign"]["owner"] == "x"
    assert batch.release_all() == 0


def test_release_of_one_key_only_touches_the_owner_s_claim(db):
    ledger = _ledger(db)
    ledger.import_replies([("r", b"paid")], origin="o")
    ledger.claim("r", refresh=True)
    ledger.claim("n")
    other = DatabaseLedger(db, ledger.scope, owner="other")
    other.claim("o")
    ledger.release("r")
    ledger.release("n")
    ledger.release("o")
    rows = _rows(db, ledger.scope)
    assert set(rows) == {"r", "o"}
    assert (rows["r"]["state"], rows["r"]["owner"], rows["r"]["lease_until"]) == (
        "replied", None, None)
    assert rows["o"]["owner"] == "other" and rows["o"]["state"] == "pending"


def test_a_second_reply_keeps_the_first_in_replaced_with_its_fields(db):
    ledger = _ledger(db)
    ledger.claim("k")
    ledger.record_reply("k", b"first", status=201, origin="run-1")
    ledger.claim("k", refresh=True)
    first_at = _rows(db, ledger.scope)["k"]["updated_at"]
    ledger.record_reply("k", b"second", status=202, origin="run-2")
    replaced = _replaced(db, ledger.scope)
    assert len(replaced) == 1
    old = replaced[0]
    assert (old["key"], old["content"], old["status"], old["origin"], old["recorded_at"]) == (
        "k", b"first", 201, "run-1", first_at)
    assert old["replaced_at"] >= first_at
    reply = ledger.get("k")
    assert (reply.key, reply.content, reply.status, reply.origin) == (
        "k", b"second", 202, "run-2")
    row = _rows(db, ledger.scope)["k"]
    assert (row["owner"], row["lease_until"], row["error"], row["state"]) == (
        None, None, None, "replied")


def test_a_late_reply_without_a_claim_gets_a_row_and_a_replied_row_is_overwritten(db):
    ledger = _ledger(db)
    ledger.record_reply("late", b"L", status=200, origin="o1")
    row = _rows(db, ledger.scope)["late"]
    assert (row["state"], row["sends"], row["content"], row["origin"], row["owner"]) == (
        "replied", 1, b"L", "o1", None)
    assert row["created_at"] == row["updated_at"]
    ledger.record_reply("late", b"L2", origin="o2")  # a replied row: content is not NULL
    assert ledger.get("late").content == b"L2"
    assert [r["content"] for r in _replaced(db, ledger.scope)] == [b"L"]


def test_a_failed_claim_is_taken_over_with_one_more_send_and_no_error(db):
    first = _ledger(db, owner="a")
    first.claim("k")
    first.record_failure("k", "x" * 3000)
    row = _rows(db, first.scope)["k"]
    assert row["state"] == "failed" and row["error"] == "x" * 2000
    assert row["owner"] is None and row["lease_until"] is None
    second = DatabaseLedger(db, first.scope, owner="b", lease=30.0)
    moment = time.time()
    claim = second.claim("k")
    assert claim.outcome == "mine" and claim.owner == "b"
    assert moment + 29 < claim.lease_until < time.time() + 31
    row = _rows(db, first.scope)["k"]
    assert (row["state"], row["owner"], row["sends"], row["error"]) == ("pending", "b", 2, None)
    assert row["lease_until"] == claim.lease_until
    first.record_failure("k", "not mine")  # only the owner's pending claim fails
    assert _rows(db, first.scope)["k"]["state"] == "pending"


def test_a_live_claim_of_another_owner_is_busy_and_a_reply_is_returned(db):
    first = _ledger(db, owner="a-live-owner")
    first.claim("k")
    second = DatabaseLedger(db, first.scope, owner="b")
    busy = second.claim("k")
    assert busy.outcome == "busy" and busy.owner == first.owner
    first.record_reply("k", b"R", origin="o")
    replied = second.claim("k")
    assert replied.outcome == "replied" and replied.reply.content == b"R"


def test_renew_extends_only_this_owner_s_pending_claims(db):
    ledger = _ledger(db, owner="me", lease=1000.0)
    ledger.claim("a")
    ledger.claim("b")
    ledger.record_reply("b", b"B")
    DatabaseLedger(db, ledger.scope, owner="other").claim("c")
    with db.write() as conn:
        conn.execute(ledger_requests.update().where(ledger_requests.c.scope == ledger.scope)
                     .values(lease_until=5.0))
    assert ledger.renew() == 1
    rows = _rows(db, ledger.scope)
    assert rows["a"]["lease_until"] > time.time() + 900
    assert rows["c"]["lease_until"] == 5.0


def test_claim_many_takes_lapsed_and_failed_keys_and_counts_a_send(db):
    ledger = _ledger(db, owner="batch")
    holder = DatabaseLedger(db, ledger.scope, owner="holder", lease=0.0)
    holder.claim("lapsed")
    holder.claim("failed")
    holder.record_failure("failed", "e")
    live = DatabaseLedger(db, ledger.scope, owner="live", lease=600.0)
    live.claim("held")
    time.sleep(0.01)
    until = time.time() + 100
    assert ledger.claim_many(["lapsed", "failed", "held", "new", "new"], until=until) == {
        "lapsed", "failed", "new"}
    rows = _rows(db, ledger.scope)
    for key in ("lapsed", "failed"):
        assert (rows[key]["state"], rows[key]["owner"], rows[key]["lease_until"],
                rows[key]["sends"], rows[key]["error"]) == ("pending", "batch", until, 2, None)
    assert (rows["new"]["sends"], rows["new"]["lease_until"], rows["new"]["state"]) == (
        1, until, "pending")
    assert rows["new"]["created_at"] == rows["new"]["updated_at"]
    assert rows["held"]["owner"] == "live"


def test_import_counts_only_new_keys_and_marks_them_unsent(db):
    ledger = _ledger(db)
    assert ledger.import_replies([("a", b"1"), ("b", b"2")], origin="imp") == 2
    assert ledger.import_replies([("a", b"9"), ("c", b"3")], origin="imp") == 1
    rows = _rows(db, ledger.scope)
    assert rows["a"]["content"] == b"1" and rows["a"]["sends"] == 0
    assert (rows["c"]["state"], rows["c"]["status"], rows["c"]["origin"]) == (
        "replied", 200, "imp")
    assert ledger.count_origin("imp") == 3 and ledger.count_origin("other") == 0
    assert ledger.keys() == {"a", "b", "c"}


def test_stats_count_each_state_the_replaced_and_the_reply_bytes(db):
    ledger = _ledger(db, owner="me")
    assert ledger.stats() == {"location": f"service database (sqlite), scope {ledger.scope}",
                              "replies": 0, "pending": 0, "failed": 0, "replaced": 0,
                              "reply_bytes": 0}
    ledger.import_replies([("a", b"12345"), ("b", b"xy")], origin="o")
    ledger.claim("b", refresh=True)
    ledger.record_reply("b", b"xyz")
    ledger.claim("p")
    ledger.claim("f")
    ledger.record_failure("f", "e")
    other = DatabaseLedger(db, "other-" + ledger.scope, owner="me")
    other.import_replies([("z", b"zzzzzzzz")], origin="o")
    assert ledger.stats() == {"location": f"service database (sqlite), scope {ledger.scope}",
                              "replies": 2, "pending": 1, "failed": 1, "replaced": 1,
                              "reply_bytes": 8}


def test_clear_removes_replies_and_failures_of_its_scope_but_no_claim(db):
    ledger = _ledger(db)
    ledger.import_replies([("a", b"1")], origin="o")
    ledger.claim("a", refresh=True)
    ledger.record_reply("a", b"2")
    ledger.claim("f")
    ledger.record_failure("f", "e")
    ledger.claim("p")
    other = DatabaseLedger(db, "o-" + ledger.scope, owner="x")
    other.import_replies([("a", b"1")], origin="o")
    other.claim("a", refresh=True)
    other.record_reply("a", b"2")
    assert ledger.clear() == 2
    assert set(_rows(db, ledger.scope)) == {"p"}
    assert _replaced(db, ledger.scope) == []
    assert len(_replaced(db, other.scope)) == 1 and other.keys() == {"a"}


def test_get_and_replies_return_only_replied_rows_of_the_scope(db):
    ledger = _ledger(db)
    ledger.record_reply("r", b"R", status=203, origin="o")
    ledger.claim("p")
    DatabaseLedger(db, "x-" + ledger.scope, owner="y").record_reply("q", b"Q")
    reply = ledger.get("r")
    assert (reply.key, reply.content, reply.status, reply.origin) == ("r", b"R", 203, "o")
    assert ledger.get("p") is None and ledger.get("q") is None
    found = ledger.replies(["r", "p", "q", "r"])
    assert set(found) == {"r"} and found["r"].status == 203 and found["r"].origin == "o"
    assert found["r"].recorded_at == reply.recorded_at


def test_covered_counts_another_owner_s_live_claim_but_not_a_lapsed_one(db):
    ledger = _ledger(db, owner="me")
    DatabaseLedger(db, ledger.scope, owner="live", lease=600).claim("live")
    DatabaseLedger(db, ledger.scope, owner="dead", lease=0.0).claim("lapsed")
    ledger.claim("mine")
    ledger.record_reply("done", b"d")
    time.sleep(0.01)
    assert ledger.covered(["live", "lapsed", "mine", "done", "none"]) == {"live", "done"}


def test_only_an_outage_counts_as_a_lost_database():
    """An interface error of SQLite is a misuse of it (Python 3.10 reports a parameter it
    cannot bind so), never "unavailable, try again"; a driver's closed connection is."""
    import sqlite3

    from judge.service.db._db import connection_lost

    def wrapped(kind: type, orig: BaseException) -> BaseException:
        return kind("SELECT 1", {}, orig)

    assert not connection_lost(wrapped(sa.exc.InterfaceError,
                                       sqlite3.InterfaceError("Error binding parameter 1")))
    assert connection_lost(wrapped(sa.exc.InterfaceError, ConnectionError("connection closed")))
    assert connection_lost(wrapped(sa.exc.OperationalError,
                                   sqlite3.OperationalError("database is locked")))
    assert not connection_lost(wrapped(sa.exc.ProgrammingError,
                                       sqlite3.ProgrammingError("no such table")))


def test_a_database_error_names_the_ledger_and_its_scope_in_one_line(db):
    """A statement the database refuses is a StoreError naming the ledger, its scope and the
    error class: its first line only (no SQL, no parameters)."""
    ledger = DatabaseLedger(db, "lab", owner="me")
    with pytest.raises(StoreError) as caught:
        ledger.record_reply("k", object())  # type: ignore[arg-type]
    message = str(caught.value)  # sqlite3 calls it an InterfaceError before Python 3.11
    assert re.match(r"the service's ledger \(lab\): (Programming|Interface)Error: \(sqlite3\.",
                    message), message
    assert "\n" not in message and "[SQL" not in message
    with pytest.raises(StoreError) as caught:
        purge_ledger(db, object())  # type: ignore[arg-type]
    assert str(caught.value).startswith("the service's ledger: StatementError: ")


def test_retention_keeps_what_was_written_at_the_cut_off(db):
    ledger = _ledger(db)
    ledger.import_replies([("old", b"1"), ("edge", b"2")], origin="o")
    ledger.claim("edge", refresh=True)
    ledger.record_reply("edge", b"3")
    with db.write() as conn:
        conn.execute(ledger_requests.update().where(ledger_requests.c.scope == ledger.scope,
                                                    ledger_requests.c.key == "old")
                     .values(updated_at=100.0))
        conn.execute(ledger_requests.update().where(ledger_requests.c.scope == ledger.scope,
                                                    ledger_requests.c.key == "edge")
                     .values(updated_at=200.0))
        conn.execute(ledger_replaced.update().where(ledger_replaced.c.scope == ledger.scope)
                     .values(replaced_at=200.0))
    assert purge_ledger(db, 200.0) == 1
    assert set(_rows(db, ledger.scope)) == {"edge"}
    assert len(_replaced(db, ledger.scope)) == 1
    assert purge_ledger(db, 200.5) >= 1
    assert _replaced(db, ledger.scope) == []
