"""Workers apart from the API, supervised, with an attempt cap, on a real Postgres:

* ``kill -9`` of the worker process under ``dst-judge serve``: a new one is up within 5 s, the
  job is taken over when its lease expires and succeeds; ``/metrics`` counts the restart;
* a job that kills its worker on every claim ends ``failed`` after ``--max-attempts`` with the
  reason, its paid replies stay in the ledger, and a job beside it succeeds;
* one API-only replica (``serve --no-worker``) and two ``dst-judge worker`` processes run a
  queue together, each request paid once.

Every test is bounded (the processes stop themselves after ``--max-seconds``)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import sqlalchemy as sa

import judge
from judge.service import Database
from judge.service.db._db import ledger_requests
from judge.service.db._db import workers as worker_rows
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, ServerProcess
from tests.service.serve_process import (
    ServeProcess,
    WorkerCommand,
    create_token,
    get_text,
    job_dialogues,
)

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]


def _inputs(client: judge.Client, dialogues: list) -> tuple[dict, list[str]]:
    common = {"schema": client.upload(EXAMPLES / "schema.json", "schema").id,
              "predictions": client.upload(EXAMPLES / "predictions.jsonl",
                                           "predictions").id}
    return common, [client.upload(path, "dialogues").id for path in dialogues]


def _pid(worker_id: str | None) -> int | None:
    """The process id in a worker id (``host:pid:hex``)."""
    parts = (worker_id or "").split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def _wait_for_claim_loops(url: str, count: int, commands: list[WorkerCommand]) -> None:
    """Until ``count`` workers have beaten once since they registered: each is in its claim
    loop (on a crowded machine a worker command takes seconds to get there; jobs submitted
    before would all go to the first one up)."""
    db = Database(url)
    deadline = time.monotonic() + 120
    try:
        while True:
            with db.read() as conn:
                ready = conn.execute(sa.select(sa.func.count()).select_from(worker_rows)
                                     .where(worker_rows.c.heartbeat_at
                                            > worker_rows.c.started_at + 0.5)
                                     ).scalar()
            if ready >= count:
                return
            assert time.monotonic() < deadline, \
                (f"{ready} of {count} workers in their claim loops after 120 s",
                 [c.text()[-2000:] for c in commands])
            time.sleep(0.1)
    finally:
        db.dispose()


def test_a_killed_worker_process_is_replaced_within_5_s_and_its_job_succeeds(
        tmp_path, postgres_db):
    token = create_token(tmp_path / "api", "lab", db=postgres_db)
    with ServerProcess(FaultConfig(latency=0.3), max_seconds=180) as model:
        endpoints = {"fake": {"base_url": model.url}}
        args = ["--jobs", "1", "--lease", "2", "--grace", "1", "--requests-per-minute", "0"]
        with ServeProcess(tmp_path / "api", endpoints=endpoints, db=postgres_db, args=args,
                          max_seconds=170) as server:
            client = judge.Client(server.url, token)
            common, (dialogues,) = _inputs(client, job_dialogues(tmp_path, 1))
            job_id = client.submit("evaluate", {**common, "dialogues": dialogues},
                                   {"model": "m", "concurrency": 1}).id
            deadline = time.monotonic() + 60
            while client.job(job_id).progress.done < 2:
                assert time.monotonic() < deadline, "the job never started"
                time.sleep(0.05)
            before = server.health(details=True)["worker"]
            assert before["alive"] and before["restarts"] == 0
            os.kill(before["pid"], signal.SIGKILL)
            killed = time.monotonic()
            while True:
                now = server.health(details=True)["worker"]
                if now["alive"] and now["pid"] != before["pid"]:
                    break
                assert time.monotonic() - killed < 5.0, f"no new worker after 5 s: {now}"
                time.sleep(0.05)
            replaced_after = time.monotonic() - killed
            done = client.wait(job_id, timeout=90)
            status, ready = get_text(server.url + "/readyz")
            _, metrics = get_text(server.url + "/metrics", token=server.admin_token())
    print(f"new worker process after {replaced_after:.2f} s")
    assert now["restarts"] == 1
    assert done.status == "succeeded" and done.exit_code == 0, (done, server.errors())
    assert done.attempts == 2 and done.progress.done == 22
    assert status == 200 and '"ready"' in ready
    assert _metric(metrics, "dst_judge_worker_restarts_total") == 1.0
    assert _metric(metrics, "dst_judge_lease_expiries_total") >= 1.0
    assert _metric(metrics, "dst_judge_claims_total") >= 1.0  # the new process's claim


def test_a_job_that_kills_its_worker_every_time_fails_after_the_cap_and_another_succeeds(
        tmp_path, postgres_db):
    token = create_token(tmp_path / "api", "lab", db=postgres_db)
    with ServerProcess(FaultConfig(latency=0.3), max_seconds=420) as model:
        endpoints = {"fake": {"base_url": model.url}}
        # a lease of 4 s: on a crowded machine a 2 s one can lapse while its worker lives,
        # and the lapse would spend one of the three attempts that the kills are meant to
        args = ["--jobs", "2", "--worker-processes", "2", "--lease", "4", "--grace", "1",
                "--max-attempts", "3", "--requests-per-minute", "0"]
        with ServeProcess(tmp_path / "api", endpoints=endpoints, db=postgres_db, args=args,
                          max_seconds=400) as server:
            client = judge.Client(server.url, token)
            common, (poison_in, good_in) = _inputs(client, job_dialogues(tmp_path, 2))
            options = {"model": "m", "concurrency": 1}
            poison = client.submit("evaluate", {**common, "dialogues": poison_in}, options).id
            good = client.submit("evaluate", {**common, "dialogues": good_in}, options).id
            killed: set[int] = set()
            # a restarted worker process imports the library again: seconds on an idle
            # machine, a minute on a crowded one (bounded all the same)
            deadline = time.monotonic() + 300
            while (job := client.job(poison)).status not in ("failed", "succeeded"):
                assert time.monotonic() < deadline, (job, killed)
                pid = _pid(job.progress.worker)
                if job.status == "running" and pid and pid not in killed \
                        and job.progress.done > 0:
                    os.kill(pid, signal.SIGKILL)  # the job "kills its worker"
                    killed.add(pid)
                time.sleep(0.05)
            other = client.wait(good, timeout=120)
            # the third killed process is replaced while the job is already failed: the
            # counter may lag the job's end by a moment (bounded)
            settle = time.monotonic() + 30
            while True:
                _, metrics = get_text(server.url + "/metrics", token=server.admin_token())
                restarts = _metric(metrics, "dst_judge_worker_restarts_total")
                if restarts >= len(killed) or time.monotonic() > settle:
                    break
                time.sleep(0.2)
    db = Database(postgres_db)
    try:
        with db.read() as conn:
            replied = conn.execute(sa.select(sa.func.count()).select_from(ledger_requests)
                                   .where(ledger_requests.c.state == "replied")).scalar()
    finally:
        db.dispose()
    assert job.status == "failed" and job.attempts == 3 and len(killed) == 3, job
    assert "its worker died while running it, 3 times" in job.error
    assert other.status == "succeeded" and other.exit_code == 0, other
    assert replied > 22  # the good job's 22 and what the poison job paid before each kill
    assert _metric(metrics, "dst_judge_jobs_given_up_total") == 1.0
    assert _metric(metrics, "dst_judge_worker_restarts_total") == 3.0, metrics


def test_an_api_replica_and_two_worker_commands_run_a_queue_together(tmp_path, postgres_db):
    jobs = 6
    token = create_token(tmp_path / "api", "lab", db=postgres_db)
    with ServerProcess(FaultConfig(latency=0.05), max_seconds=240) as model:
        endpoints = {"fake": {"base_url": model.url}}
        workers = [WorkerCommand(tmp_path / f"w{index}", db=postgres_db, endpoints=endpoints,
                                 args=["--jobs", "2", "--lease", "5"], max_seconds=200)
                   for index in range(2)]
        with ServeProcess(tmp_path / "api", endpoints=endpoints, db=postgres_db,
                          args=["--no-worker", "--requests-per-minute", "0"],
                          max_seconds=220) as api, \
                workers[0], workers[1]:
            assert api.health(details=True)["worker"] is None
            assert get_text(api.url + "/readyz")[0] == 200
            _wait_for_claim_loops(postgres_db, 2, workers)
            client = judge.Client(api.url, token)
            common, dialogues = _inputs(client, job_dialogues(tmp_path, jobs))
            ids = [client.submit("evaluate", {**common, "dialogues": d},
                                 {"model": "m", "concurrency": 2}).id for d in dialogues]
            done = [client.wait(job_id, timeout=150) for job_id in ids]
        codes = [worker.process.returncode for worker in workers]
        paid = model.snapshot(bodies=False)
    assert [(j.status, j.exit_code) for j in done] == [("succeeded", 0)] * jobs, \
        [w.text()[-2000:] for w in workers]
    assert codes == [0, 0], [w.text()[-6000:] for w in workers]  # drained on SIGTERM
    pids = {_pid(j.progress.worker) for j in done}
    assert len(pids) >= 2, pids  # both worker commands took jobs
    assert paid["completed"] == paid["distinct_bodies"] == jobs * 22
    for worker in workers:
        assert "Traceback" not in worker.text()
