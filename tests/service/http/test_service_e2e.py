"""End to end: a real ``dst-judge serve`` process, a fake OpenAI-compatible server process on
127.0.0.1, and the ``submit / jobs / results`` commands; the results equal a local CLI run of
the same inputs; SIGTERM drains (calls in flight finish and are kept, the job goes back to the
queue) and the next start resumes the job without paying again."""

from __future__ import annotations

import calendar
import signal
import time

import pytest
import sqlalchemy as sa

import judge
import judge.errors
from judge.cli import main as cli_main
from judge.service import Database
from judge.service.db._db import job_calls, jobs
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, ServerProcess
from tests.service.serve_process import ServeProcess, cli, create_token

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]

COMPARED = ("dialogue_id", "turn_index", "verdict", "jga", "rule", "incorrect", "missed",
            "error", "pred_turn_state", "gold_turn_state", "state")


def _inputs() -> list[str]:
    return ["--schema", str(EXAMPLES / "schema.json"),
            "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
            "--predictions", str(EXAMPLES / "predictions.jsonl")]


def test_submit_wait_results_equal_a_local_cli_run(tmp_path, capsys):
    with ServerProcess(FaultConfig(latency=0.0), max_seconds=300) as model:
        data = tmp_path / "server"
        token = create_token(data, "lab")
        endpoints = {"fake": {"base_url": model.url, "api_key_env": "NO_SUCH_KEY"}}
        with ServeProcess(data, endpoints=endpoints) as server:
            env = {"DST_JUDGE_TOKEN": token, "DST_JUDGE_SERVER": server.url}
            done = cli("submit", "evaluate", *_inputs(), "--model", "m", "--wait", env=env)
            assert "succeeded (exit 0" in done.stdout
            job_id = done.stdout.split()[1]
            cli("results", job_id, "--out", str(tmp_path / "remote"), env=env)
            client = judge.Client(server.url, token)
            assert [j.id for j in client.jobs()] == [job_id]
            try:
                judge.Client(server.url, "dsj_nope").jobs()
            except judge.errors.ServiceError as exc:
                assert exc.status == 401 and "invalid or revoked token" in str(exc)
            else:
                raise AssertionError("a wrong token was accepted")
        paid_by_server = model.snapshot()["completed"]
        code = cli_main(["evaluate", *_inputs(), "--model", "m", "--base-url", model.url,
                               "--no-cache", "--out", str(tmp_path / "local"), "--no-progress"])
        assert code == 0
    remote, mine = judge.load_run(tmp_path / "remote"), judge.load_run(tmp_path / "local")
    assert paid_by_server == 22
    assert [{k: r[k] for k in COMPARED} for r in remote.rows] == \
        [{k: r[k] for k in COMPARED} for r in mine.rows]
    for key in ("tsa", "judge_jga", "rule", "turns", "scored_turns", "error_turns"):
        assert remote.summary[key] == mine.summary[key], key


def _upload(client: judge.Client) -> dict[str, str]:
    return {kind: client.upload(EXAMPLES / name, kind).id for kind, name in
            (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
             ("predictions", "predictions.jsonl"))}


def test_sigterm_drains_then_the_job_resumes_without_paying_twice(tmp_path):
    with ServerProcess(FaultConfig(latency=0.4), max_seconds=300) as model:
        data = tmp_path / "server"
        token = create_token(data, "lab")
        endpoints = {"fake": {"base_url": model.url}}
        server = ServeProcess(data, endpoints=endpoints, args=["--grace", "10"]).start()
        try:
            client = judge.Client(server.url, token)
            job_id = client.submit("evaluate", _upload(client), {"model": "m",
                                                                  "concurrency": 2}).id
            deadline = time.monotonic() + 60
            while client.job(job_id).progress.done < 4:
                assert time.monotonic() < deadline, \
                    f"job {job_id} did not judge 4 turns within 60 s: {client.job(job_id)}"
                time.sleep(0.1)
            started = time.monotonic()
            code = server.terminate(timeout=60)  # uvicorn re-raises SIGTERM once it has drained
            assert time.monotonic() - started < 15
            assert code == -signal.SIGTERM, code  # a clean stop, not a crash out of the handler
        finally:
            server.kill()
        db = Database(f"sqlite:///{data / 'dst-judge.db'}")
        with db.read() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
            logged = conn.execute(sa.select(sa.func.count()).select_from(job_calls)
                                  .where(job_calls.c.job_id == job_id)).scalar()
        db.dispose()
        assert row.status == "queued" and row.lease_owner is None
        paid = model.snapshot()["completed"]
        assert 4 <= logged < 22
        assert paid == logged  # every paid reply of the drained replica is kept
        with ServeProcess(data, endpoints=endpoints) as again:
            final = judge.Client(again.url, token).wait(job_id, timeout=60)
        assert final.status == "succeeded" and final.attempts == 2
        assert final.progress.done == 22
        snapshot = model.snapshot()
        assert snapshot["completed"] == 22 and snapshot["max_completed_per_body"] == 1


def test_two_worker_processes_share_the_slots_and_each_takes_jobs(tmp_path):
    """--worker-processes 2 --jobs 2: two worker processes with one slot each. Two jobs whose
    22 calls go one at a time to a 0.3 s fake model (about 7 s each) run at the same time, one
    in each process, each claimed once."""
    with ServerProcess(FaultConfig(latency=0.3), max_seconds=300) as model:
        data = tmp_path / "server"
        token = create_token(data, "lab")
        endpoints = {"fake": {"base_url": model.url, "api_key_env": "NO_SUCH_KEY"}}
        args = ["--jobs", "2", "--worker-processes", "2"]
        with ServeProcess(data, endpoints=endpoints, args=args) as server:
            worker = server.health(details=True)["worker"]
            assert len(worker["processes"]) == 2 and worker["alive"]
            client = judge.Client(server.url, token)
            files = _upload(client)
            ids = [client.submit("evaluate", files, {"model": "m", "concurrency": 1}).id
                   for _ in range(2)]
            done = [client.wait(job_id, timeout=120) for job_id in ids]
        paid = model.snapshot()
    assert [j.status for j in done] == ["succeeded", "succeeded"]
    assert [j.attempts for j in done] == [1, 1]
    assert done[0].progress.worker != done[1].progress.worker
    assert paid["completed"] == paid["distinct_bodies"] == 22  # the same calls: paid once
    starts = sorted(_seconds(str(j.started_at)) for j in done)
    ends = sorted(_seconds(str(j.finished_at)) for j in done)
    assert starts[1] < ends[0], "the second job waited for the first: one slot in all"


def _seconds(stamp: str) -> float:
    """Seconds since the epoch of the service's ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC)."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(stamp[19:-1])
