"""The fault test: two ``dst-judge serve`` replicas on one Postgres, 20 jobs with inputs of their
own, ``kill -9`` of one replica mid-way. Every job succeeds (the survivor takes over the dead
replica's jobs when their leases expire and resumes them from the run log in the database),
the results equal a local run of the same inputs, and the completions paid exceed the
distinct calls by at most the calls that were in flight when the replica died.

The bound holds by construction: a reply is committed to the ledger in the shared database
before its call gives back its concurrency slot, so what the dead replica had received is
served to the survivor, and only requests on the wire at the kill are sent again."""

from __future__ import annotations

import time

import pytest

import judge
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer, ServerProcess
from tests.service.serve_process import ServeProcess, create_token, job_dialogues

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]

JOBS = 20
SLOTS = 4
CONCURRENCY = 4


def test_kill_9_of_one_replica_loses_no_job_and_repays_only_calls_in_flight(
        tmp_path, postgres_db):
    dialogues = job_dialogues(tmp_path, JOBS)
    token = create_token(tmp_path / "a", "lab", db=postgres_db)
    args = ["--jobs", str(SLOTS), "--lease", "3", "--grace", "2"]
    with ServerProcess(FaultConfig(latency=0.3), max_seconds=600) as model:
        endpoints = {"fake": {"base_url": model.url}}
        replica_a = ServeProcess(tmp_path / "a", endpoints=endpoints, db=postgres_db, args=args)
        replica_b = ServeProcess(tmp_path / "b", endpoints=endpoints, db=postgres_db, args=args)
        with replica_a, replica_b:
            client = judge.Client(replica_b.url, token)
            common = {"schema": client.upload(EXAMPLES / "schema.json", "schema").id,
                      "predictions": client.upload(EXAMPLES / "predictions.jsonl",
                                                   "predictions").id}
            ids = [client.submit("evaluate", {**common, "dialogues":
                                              client.upload(path, "dialogues").id},
                                 {"model": "m", "concurrency": CONCURRENCY}).id
                   for path in dialogues]
            a_id = replica_a.health(details=True)["worker"]["id"]
            deadline = time.monotonic() + 120
            while True:  # wait until the doomed replica is in the middle of some jobs
                jobs = client.jobs(limit=100)
                doomed = [j for j in jobs if j.status == "running"
                          and j.progress.worker == a_id and j.progress.done > 0]
                if doomed:
                    break
                assert time.monotonic() < deadline, "replica A never ran a job"
                time.sleep(0.05)
            replica_a.kill()
            finished = [client.wait(job_id, timeout=180) for job_id in ids]
            verdicts = {job_id: [(r["dialogue_id"], r["turn_index"], r["verdict"], r["rule"])
                                 for r in client.judgments(job_id)] for job_id in ids}
        stats = model.snapshot()
    unfinished = [(j.id, j.status, j.exit_code, j.error, j.attempts)
                  for j in finished if j.status != "succeeded" or j.exit_code != 0]
    assert not unfinished, (unfinished, replica_a.errors(), replica_b.errors())
    taken_over = [j for j in finished if j.attempts > 1]
    assert taken_over, "no job moved to the surviving replica"
    assert {j.progress.worker for j in finished} - {a_id}  # the survivor finished jobs
    distinct = JOBS * 22
    assert stats["distinct_bodies"] == distinct
    in_flight_bound = SLOTS * CONCURRENCY
    print(f"completions {stats['completed']} for {distinct} distinct calls "
          f"(bound {distinct} + {in_flight_bound} in flight)")
    assert distinct <= stats["completed"] <= distinct + in_flight_bound, stats["completed"]

    with FaultServer(FaultConfig(latency=0.0)) as local_model:
        for job, path in zip(finished, dialogues, strict=True):
            schema = judge.load_schema(EXAMPLES / "schema.json")
            dialogue_set = judge.load_dialogues(path)
            predictions = judge.load_predictions(EXAMPLES / "predictions.jsonl", dialogue_set,
                                                 schema)
            config = judge.load_config({"base_url": local_model.url, "model": "m",
                                        "use_cache": False, "api_key": "sk-local"})
            local = judge.evaluate(config, schema, dialogue_set, predictions)
            assert job.headline is not None
            assert job.headline.tsa == local.summary["tsa"]
            assert job.headline.judge_jga == local.summary["judge_jga"]
            assert verdicts[job.id] == [(r["dialogue_id"], r["turn_index"], r["verdict"],
                                            r["rule"]) for r in local.rows]
