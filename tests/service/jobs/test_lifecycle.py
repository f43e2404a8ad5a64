"""A job's lifecycle has one home (``judge.service.jobs._lifecycle``): the words of its states
appear nowhere else in the package, the API's words are the same, and a move the lifecycle does not
allow is refused before anything is written."""

from __future__ import annotations

import ast
import typing
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from judge import _api_models
from judge.service.auth._auth import Principal
from judge.service.db._db import jobs
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import JobSpec
from judge.service.jobs._lifecycle import (
    ACTIVE,
    CLAIMABLE,
    FINAL,
    MOVES,
    STATUSES,
    IllegalMove,
    JobStatus,
    check_move,
    move,
)
from judge.service.queue import JobQueue
from tests.service.conftest import queue_database

PACKAGE = Path(__file__).resolve().parents[3] / "judge"
WORDS = {status.value for status in JobStatus}

NOT_JOB_STATES = {
    # path under judge/, word: (count, what the word means there)
    ("cli/_batch.py", "failed"): (1, "a Batch API batch's count of failed requests"),
    ("cli/_cache.py", "failed"): (1, "the ledger's count of failed requests"),
    ("cli/_report.py", "failed"): (1, "a run's count of failed calls"),
    ("model/local/_server.py", "stopped"): (1, "the local model server stopped"),
    ("model/local/_status.py", "running"): (2, "the local model server's state"),
    ("model/local/_status.py", "stopped"): (2, "the local model server's state"),
    ("pipeline/_batch.py", "failed"): (1, "a Batch API batch's state"),
    ("pipeline/_batch.py", "cancelled"): (1, "a Batch API batch's state"),
    ("pipeline/_result.py", "failed"): (1, "a run's count of failed calls"),
    ("service/db/_db.py", "failed"): (1, "the job_batches column of failed requests"),
    ("service/ledger/_ledger.py", "failed"): (5, "a ledger request's state and count"),
    ("service/http/_metrics.py", "running"): (1, "the attribute of a worker thread"),
    ("service/queue/_batchjob.py", "failed"): (7, "a batch's count of failed requests"),
    ("service/queue/_batchjob.py", "cancelled"): (1, "a Batch API batch's state"),
    ("service/queue/_evaluate.py", "failed"): (1, "a run's count of failed calls"),
    ("store/_ledger.py", "failed"): (2, "the ledger's count of failed requests"),
}
"""The same words meaning something else than a job's state (counted: one more is a job
status literal that slipped in)."""


def _status_literals() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        # _names.py states the words once for the CLI's parser (no stage loads for --help) and
        # the API's models; the test below holds them equal to the lifecycle's states
        if "migrations" in path.parts or relative in ("service/jobs/_lifecycle.py",
                                                      "_api_models.py", "_names.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in WORDS:
                found[relative, node.value] += 1
    return found


def test_no_job_status_literal_outside_the_lifecycle_module():
    found = _status_literals()
    expected = Counter({key: count for key, (count, _) in NOT_JOB_STATES.items()})
    extra = {key: n for key, n in found.items() if n > expected.get(key, 0)}
    assert not extra, f"job status words outside judge/service/jobs/_lifecycle.py: {extra}"
    assert found == expected  # the exceptions listed are still there (else: drop them)


def test_the_api_words_are_the_lifecycle_states():
    assert set(typing.get_args(_api_models.JobStatus)) == WORDS
    assert set(_api_models.FINAL_STATUSES) == set(FINAL)
    assert set(_api_models.WORKING_STATUSES) == set(ACTIVE) - {JobStatus.QUEUED}


def test_the_states_are_the_database_strings():
    assert [s.value for s in STATUSES] == ["queued", "running", "waiting", "succeeded",
                                           "failed", "cancelled", "stopped"]
    assert JobStatus.QUEUED == "queued" and f"{JobStatus.STOPPED}" == "stopped"
    assert set(CLAIMABLE) == set(ACTIVE)
    assert all(not MOVES[state] - {JobStatus.QUEUED} for state in FINAL
               if state != JobStatus.STOPPED)  # a final job only ever goes back to the queue
    assert MOVES[JobStatus.SUCCEEDED] == frozenset()


@pytest.mark.parametrize(("source", "target"), [
    (JobStatus.SUCCEEDED, JobStatus.RUNNING), (JobStatus.SUCCEEDED, JobStatus.QUEUED),
    (JobStatus.CANCELLED, JobStatus.RUNNING), (JobStatus.QUEUED, JobStatus.SUCCEEDED),
    (JobStatus.WAITING, JobStatus.QUEUED), (None, JobStatus.RUNNING)])
def test_an_illegal_move_is_refused(source, target):
    with pytest.raises(IllegalMove) as caught:
        check_move(source, target)
    assert caught.value.status == 409
    assert f"cannot become {target.value}" in str(caught.value)


def test_an_unknown_status_word_is_refused():
    with pytest.raises(ValueError):
        check_move("queued", "paused")


def test_an_illegal_move_writes_nothing_and_a_legal_one_writes(tmp_path):
    db = queue_database(tmp_path / "queue.db")
    try:
        principal = Principal("tok_x", "x", "prj_x", "x", ("submit",))
        job_id = JobStore(db).submit(principal, JobSpec("audit", "live", {"run": "job_y"},
                                                        {}))["id"]
        queue = JobQueue(db)
        assert queue.claim("w", 30.0).id == job_id
        assert queue.finish(job_id, "w", status=JobStatus.SUCCEEDED, exit_code=0)
        with db.write() as conn, pytest.raises(IllegalMove):
            move(conn, job_id, (JobStatus.SUCCEEDED,), JobStatus.RUNNING)
        with db.read() as conn:
            assert conn.execute(sa.select(jobs.c.status)).scalar() == "succeeded"
        with pytest.raises(Exception, match="only a stopped, failed or cancelled job"):
            JobStore(db).resume("prj_x", job_id, None)
        # a finished job is not finished again by a worker that lost it
        assert not queue.finish(job_id, "w", status=JobStatus.FAILED, exit_code=4)
        with db.write() as conn:
            assert move(conn, job_id, (JobStatus.FAILED,), JobStatus.QUEUED) == 0  # not failed
        assert JobStore(db).get("prj_x", job_id)["status"] == "succeeded"
    finally:
        db.dispose()


def test_only_the_token_store_reads_the_tokens_table():
    """The tokens table is the token store's (``_auth.TokenBook``): the job store, the
    runners and the routes ask it, none imports the table (the database's face,
    ``db/__init__.py``, passes it on)."""
    importers = set()
    for path in sorted((PACKAGE / "service").rglob("*.py")) + sorted((PACKAGE / "web")
                                                                     .rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("db") and \
                    any(alias.name == "tokens" for alias in node.names):
                importers.add(path.relative_to(PACKAGE).as_posix())
    assert importers - {"service/db/__init__.py"} == {"service/auth/_auth.py"}


def test_the_web_pages_and_their_script_name_no_state_themselves():
    """Templates compare with ``JobStatus`` (a template global) and the page's script reads
    the flags the server sends (``final``, ``is_running``, ``has_results``)."""
    import re

    words = "|".join(sorted(WORDS))
    quoted = re.compile(r"""['"](""" + words + r""")['"]""")
    found = []
    for folder in ("templates", "static"):
        for path in sorted((PACKAGE / "web" / folder).rglob("*")):
            if path.suffix in (".html", ".js"):
                text = path.read_text(encoding="utf-8")
                found += [f"{path.name}: {m.group(0)}" for m in quoted.finditer(text)]
    assert found == []
