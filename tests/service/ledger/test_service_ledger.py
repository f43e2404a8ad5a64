"""The service's ledger (judge.service.ledger._ledger.DatabaseLedger): the contract every ledger
keeps, on the service's SQLite database and on a real Postgres (pgserver), each ledger on an
engine of its own as replicas have; plus what only the service has: scopes, worker owners."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.service import Database
from judge.service.ledger._ledger import DatabaseLedger, worker_owner
from judge.store import owner_gone
from tests.store.ledger_contract import LedgerContract


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def ledger_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[str]:
    """A migrated service database for the module: SQLite in a file, or Postgres."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'service.db'}"
    else:
        url = request.getfixturevalue("postgres_module_db")
    db = Database(url)
    db.migrate()
    db.dispose()
    yield url


@pytest.fixture
def open_ledger(ledger_db_url: str) -> Iterator[Any]:
    """``open_ledger(scope, owner=None, lease=60.0)``: a ledger on an engine of its own."""
    engines: list[Database] = []

    def make(scope: str, owner: str | None = None, lease: float = 60.0) -> DatabaseLedger:
        db = Database(ledger_db_url)
        engines.append(db)
        return DatabaseLedger(db, scope, owner=owner, lease=lease)

    yield make
    for db in engines:
        db.dispose()


class TestDatabaseLedger(LedgerContract):
    @pytest.fixture
    def make_ledger(self, open_ledger: Any) -> Any:
        scope = uuid.uuid4().hex[:12]  # every test a scope of its own on the module's database

        def make(owner: str | None = None, lease: float = 60.0) -> DatabaseLedger:
            return open_ledger(scope, owner=owner, lease=lease)

        return make


def test_scopes_do_not_see_each_other(open_ledger):
    tag = uuid.uuid4().hex[:8]
    lab, other = open_ledger(f"lab-{tag}"), open_ledger(f"other-{tag}")
    lab.claim("k")
    lab.record_reply("k", b"lab's reply")
    assert other.get("k") is None and other.keys() == set()
    assert other.claim("k").outcome == "mine"  # another project pays for its own
    assert other.stats()["replies"] == 0 and lab.stats()["replies"] == 1
    assert other.clear() == 0 and lab.get("k").content == b"lab's reply"


def test_a_worker_owner_names_this_process_and_is_not_gone(open_ledger):
    owner = worker_owner("host:1:abc", "job-1")
    assert not owner_gone(owner)
    scope = uuid.uuid4().hex[:12]
    one, two, again = (open_ledger(scope, owner=worker_owner("w", job))
                       for job in ("job-1", "job-2", "job-1"))
    assert one.claim("k").outcome == "mine"
    assert two.claim("k").outcome == "busy"  # two jobs of one worker: the second one waits
    assert again.claim("k").outcome == "busy"  # so does a second run of the same job


def test_a_reply_stored_on_sqlite_survives_a_new_engine(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'service.db'}"
    db = Database(url)
    db.migrate()
    DatabaseLedger(db, "p").record_reply("k", b"paid")
    db.dispose()
    again = Database(url)
    assert DatabaseLedger(again, "p").get("k").content == b"paid"
    again.dispose()


@pytest.mark.parametrize("shared", [False, True], ids=["project", "shared"])
def test_replies_of_an_old_cache_directory_move_into_the_database_once(tmp_path: Path,
                                                                       shared: bool):
    from types import SimpleNamespace

    from judge.service.ledger._ledger import SHARED_SCOPE
    from judge.service.queue._evaluate import EvaluateRunner
    from judge.service.queue._runners import Toolkit
    from judge.store import SQLiteLedger
    from tests.service.conftest import service_settings

    settings = service_settings(tmp_path / "data", "http://127.0.0.1:9",
                                share_cache_across_projects=shared)
    folder = settings.data_dir / "cache" / ("shared" if shared else "lab")
    old = SQLiteLedger(folder / "ledger.sqlite3")
    old.claim("k")
    old.record_reply("k", b"paid by 0.x")
    old.close()
    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    db.migrate()
    runner = EvaluateRunner(Toolkit(db, settings, None, None, None, "w"))
    ledger = runner.ledger(SimpleNamespace(project_id="lab", id="j1"))
    assert ledger.scope == (SHARED_SCOPE if shared else "lab")
    assert ledger.get("k").content == b"paid by 0.x" and ledger.get("k").origin == "cache-dir"
    assert not folder.exists() and len(list(folder.parent.glob("*.imported-*"))) == 1
    again = runner.ledger(SimpleNamespace(project_id="lab", id="j2"))  # nothing left to import
    assert again.stats()["replies"] == 1
    db.dispose()


def test_covered_keys_are_replied_or_on_the_wire_for_another_owner(open_ledger):
    """What a batch job leaves out of its request files: replies, and requests another job
    has in flight (a live lease); not its own claims, failures or lapsed claims."""
    scope = uuid.uuid4().hex[:12]
    batch = open_ledger(scope, owner="batch-job")
    other = open_ledger(scope, owner="live-job")
    lapsed = open_ledger(scope, owner="gone-job", lease=0.001)
    other.claim("replied")
    other.record_reply("replied", b"paid")
    other.claim("in-flight")
    batch.claim("mine")
    other.claim("failed")
    other.record_failure("failed", "HTTP 500")
    lapsed.claim("lapsed")
    import time

    time.sleep(0.01)
    wanted = ["replied", "in-flight", "mine", "failed", "lapsed", "unknown"] + \
        [f"k{n}" for n in range(1200)]  # more than one query's worth
    assert batch.covered(wanted) == {"replied", "in-flight"}
    replies = batch.replies(wanted)
    assert set(replies) == {"replied"} and replies["replied"].content == b"paid"


def test_a_batch_claims_what_nobody_holds_and_records_what_it_paid(open_ledger):
    """A batch job's claims: taken on new, failed, lapsed and its own keys; a second batch
    job finds them covered and waits; a live job takes them over instead of waiting; the
    batch's replies land on its claims, and its claims with no reply become failures."""
    import time

    from judge.service.ledger._ledger import batch_owner

    scope = uuid.uuid4().hex[:12]
    batch = open_ledger(scope, owner=batch_owner("job-a"))
    live = open_ledger(scope, owner="live-job")
    live.claim("replied")
    live.record_reply("replied", b"old")
    live.claim("in-flight")
    live.claim("failed")
    live.record_failure("failed", "HTTP 500")
    until = time.time() + 3600
    keys = ["replied", "in-flight", "failed", "new", "lost"] + [f"k{n}" for n in range(700)]
    ours = batch.claim_many(keys, until=until)
    assert ours == set(keys) - {"replied", "in-flight"}
    assert batch.claim_many(["new"], until=until) == {"new"}  # its own, again
    second = open_ledger(scope, owner=batch_owner("job-b"))
    assert second.claim_many(["new", "k1"], until=until) == set()
    assert second.covered(["new", "k1", "replied"]) == {"new", "k1", "replied"}
    assert live.claim("k1").outcome == "mine"  # a live request never waits on a batch

    batch.record_replies([("new", b"paid"), ("k1", b"late"), ("replied", b"again"),
                          ("elsewhere", b"y")], origin="batch:job-a")
    assert batch.get("new").content == b"paid" and batch.get("new").origin == "batch:job-a"
    assert batch.get("new").status == 200 and batch.get("elsewhere").status == 200
    assert batch.get("replied").content == b"old"  # a reply already there is kept
    assert batch.get("k1") is None  # the live job that took it over records its own
    assert batch.get("elsewhere").content == b"y"
    assert batch.count_origin("batch:job-a") == 2
    assert second.covered(["lost", "k5"]) == set()  # no reply came: failed, nobody waits
    assert batch.claim_many(["lost"], until=until) == {"lost"}
    assert batch.claim("replied", refresh=True).outcome == "mine"  # asked again, reply kept
    assert batch.release_all() == 1 and second.covered(["lost"]) == set()
    assert batch.get("replied").content == b"old"  # a released refresh keeps its reply
    assert batch.claim("replied").outcome == "replied"


def test_retention_deletes_old_replies_and_never_a_claim(ledger_db_url):
    import time

    import sqlalchemy as sa

    from judge.service.db._db import ledger_replaced, ledger_requests
    from judge.service.ledger._ledger import purge_ledger

    db = Database(ledger_db_url)
    try:
        scope = uuid.uuid4().hex[:12]
        ledger = DatabaseLedger(db, scope, owner="job")
        for key in ("old", "young", "old-failed"):
            ledger.claim(key)
        ledger.record_reply("old", b"a")
        ledger.record_reply("old", b"b")  # the first reply is kept in ledger_replaced
        ledger.record_reply("young", b"c")
        ledger.record_failure("old-failed", "HTTP 500")
        ledger.claim("old-claim")
        long_ago = time.time() - 40 * 86400
        with db.write() as conn:
            conn.execute(ledger_requests.update().where(
                ledger_requests.c.scope == scope, ledger_requests.c.key != "young")
                .values(updated_at=long_ago))
            conn.execute(ledger_replaced.update().where(ledger_replaced.c.scope == scope)
                         .values(replaced_at=long_ago))
        assert purge_ledger(db, time.time() - 30 * 86400) >= 2
        with db.read() as conn:
            left = dict(conn.execute(sa.select(ledger_requests.c.key, ledger_requests.c.state)
                                     .where(ledger_requests.c.scope == scope)).all())
            replaced = conn.execute(sa.select(sa.func.count()).select_from(ledger_replaced)
                                    .where(ledger_replaced.c.scope == scope)).scalar()
        assert left == {"young": "replied", "old-claim": "pending"}
        assert replaced == 0
    finally:
        db.dispose()


def test_the_service_sqlite_ledger_runs_in_one_thread_and_postgres_in_the_pool(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'service.db'}")
    assert DatabaseLedger(db, "lab").executor is db.serial
    assert db.serial is not None and db.serial._max_workers == 1
    assert Database("postgresql://u@127.0.0.1:1/x").serial is None
