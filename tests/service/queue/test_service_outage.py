"""Postgres stopped and started again while jobs run under ``dst-judge serve``: the API answers
503 (never 500) while it is down and recovers by itself; the worker pauses its jobs and takes
them up again when the database is back; every job succeeds with the results of an undisturbed
run; the model is paid at most for the calls in flight beyond the distinct ones; the log says
so in a line per outage, with no traceback."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import judge
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer, ServerProcess
from tests.service.serve_process import ServeProcess, create_token, get_text, job_dialogues

JOBS = 2
CONCURRENCY = 2


pytestmark = pytest.mark.servers


@contextlib.contextmanager
def _own_postgres():
    """A Postgres of this test's own (it is stopped mid-test), with stop and start."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver (test extra) is not installed")
    from pgserver._commands import pg_ctl

    folder = Path(tempfile.mkdtemp(prefix="dstj-pgo-"))
    try:
        try:
            server = pgserver.get_server(folder, cleanup_mode="stop")
        except Exception as exc:
            pytest.skip(f"Postgres (pgserver) cannot start here: {exc}")

        def stop() -> None:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)

        yield server.get_uri(), stop, server.ensure_postgres_running
    finally:
        with contextlib.suppress(Exception):
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("outage_seconds", [8, 60])
def test_postgres_restarted_mid_job_every_job_succeeds_and_the_api_never_answers_500(
        tmp_path, outage_seconds):
    """Down for 8 s (past the 5 s lease) and for 60 s (the longest outage the service
    promises to ride out)."""
    dialogues = job_dialogues(tmp_path, JOBS)
    with _own_postgres() as (db_url, stop_db, start_db), \
            ServerProcess(FaultConfig(latency=0.5), max_seconds=300) as model:
        token = create_token(tmp_path / "api", "lab", db=db_url)
        args = ["--jobs", str(JOBS), "--worker", "thread", "--lease", "5", "--grace", "1",
                "--requests-per-minute", "0"]  # this test polls fast: no 429 in the way
        with ServeProcess(tmp_path / "api", endpoints={"fake": {"base_url": model.url}},
                          db=db_url, args=args, max_seconds=280) as server:
            client = judge.Client(server.url, token)
            common = {"schema": client.upload(EXAMPLES / "schema.json", "schema").id,
                      "predictions": client.upload(EXAMPLES / "predictions.jsonl",
                                                   "predictions").id}
            ids = [client.submit("evaluate", {**common, "dialogues":
                                              client.upload(path, "dialogues").id},
                                 {"model": "m", "concurrency": CONCURRENCY}).id
                   for path in dialogues]
            deadline = time.monotonic() + 90
            while min(client.job(i).progress.done for i in ids) < 3:
                assert time.monotonic() < deadline, "the jobs never got going"
                time.sleep(0.1)
            stop_db()
            down = time.monotonic()
            answers, ready_during = [], []
            while time.monotonic() - down < outage_seconds:  # the outage, as clients see it
                answers.append(get_text(f"{server.url}/v1/jobs/{ids[0]}", token=token)[0])
                answers.append(get_text(f"{server.url}/v1/jobs", token=token)[0])
                ready_during.append(get_text(f"{server.url}/readyz")[0])
                time.sleep(0.2)
            start_db()
            outage = time.monotonic() - down
            finished = [client.wait(i, timeout=120) for i in ids]
            verdicts = {i: [(r["dialogue_id"], r["turn_index"], r["verdict"], r["rule"])
                            for r in client.judgments(i)] for i in ids}
            ready = get_text(server.url + "/readyz")[0]
        paid = model.snapshot(bodies=False)
    log = server.log.read_text(encoding="utf-8", errors="replace")
    print(f"outage {outage:.1f} s; answers during it: {sorted(set(answers))}, readyz "
          f"{sorted(set(ready_during))}; "
          f"completions {paid['completed']} for {paid['distinct_bodies']} distinct")
    assert set(answers) <= {200, 503} and 503 in answers, answers  # never a 500
    assert 503 in ready_during and 500 not in ready_during
    assert ready == 200
    assert [(j.status, j.exit_code) for j in finished] == [("succeeded", 0)] * JOBS, \
        (finished, server.errors())
    assert paid["distinct_bodies"] == JOBS * 22
    assert paid["completed"] <= JOBS * 22 + JOBS * CONCURRENCY
    assert "Traceback" not in log, log[max(0, log.find("Traceback") - 1500):][:5000]
    assert log.count("database unavailable (") == 1, log[-3000:]
    assert log.count("database reachable again") == 1
    with FaultServer(FaultConfig(latency=0.0)) as local_model:
        schema = judge.load_schema(EXAMPLES / "schema.json")
        config = judge.load_config({"base_url": local_model.url, "model": "m",
                                    "use_cache": False, "api_key": "sk-local"})
        for job_id, path in zip(ids, dialogues, strict=True):
            dialogue_set = judge.load_dialogues(path)
            predictions = judge.load_predictions(EXAMPLES / "predictions.jsonl", dialogue_set,
                                                 schema)
            local = judge.evaluate(config, schema, dialogue_set, predictions)
            assert verdicts[job_id] == [(r["dialogue_id"], r["turn_index"], r["verdict"],
                                         r["rule"]) for r in local.rows]
