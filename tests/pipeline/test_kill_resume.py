"""kill -9 in the middle of a run, then --resume: no call that was logged as finished is sent
again (the fault server counts every request body), and the resumed run is complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from judge import load_config, load_dialogues, load_predictions, load_schema
from judge.pipeline import plan_evaluation

from ..conftest import EXAMPLES
from ..fault_server import FaultConfig, FaultServer, body_hash

# runs of `dst-judge evaluate` in subprocesses, killed and resumed: each start imports the
# library, which takes seconds on a busy machine; the waits below have their own deadlines
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers("subprocess")]


def _command(url: str, out, *extra: str) -> list[str]:
    return [sys.executable, "-m", "judge", "evaluate",
            "--schema", str(EXAMPLES / "schema.json"),
            "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
            "--predictions", str(EXAMPLES / "predictions.jsonl"),
            "--model", "m", "--base-url", url, "--no-cache", "--concurrency", "2",
            "--no-progress", "--out", str(out), *extra]


def test_kill_9_then_resume_repeats_no_finished_call(tmp_path):
    out = tmp_path / "run"
    log = out / "calls.jsonl"
    with FaultServer(FaultConfig(latency=0.4, seed=3)) as server:  # 22 calls: 4 s
        url = server.url
        process = subprocess.Popen(_command(server.url, out), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 6:
                break
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        logged = [json.loads(line)["custom_id"] for line in log.read_text().splitlines()
                  if line.strip().endswith("}")]
        assert 6 <= len(logged) < 22, "the run must be cut off midway"
        resumed = subprocess.run(_command(server.url, out, "--resume"), capture_output=True,
                                 text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        stats = server.snapshot()
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    predictions = load_predictions(EXAMPLES / "predictions.jsonl", dialogues, schema)
    config = load_config({"model": "m", "base_url": url, "use_cache": False})
    plan = plan_evaluation(config, schema, dialogues, predictions)
    body_of = {call.custom_id: body_hash(call.body) for call in plan.calls}
    for custom_id in logged:
        assert stats["bodies"][body_of[custom_id]]["received"] == 1, custom_id
    # every planned call was answered; at most the calls in flight at the kill went twice
    assert {body_of[c] for c in body_of} <= set(stats["bodies"])
    assert stats["total"] <= len(plan.calls) + 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error_turns"] == 0 and summary["scored_turns"] == 11
    assert summary["calls"]["resumed"] == len(logged)


def _evaluate_command(data, url, out, *extra, concurrency=4):
    schema, dialogues, predictions = data
    return [sys.executable, "-m", "judge", "evaluate", "--schema", str(schema),
            "--dialogues", str(dialogues), "--predictions", str(predictions), "--model", "m",
            "--base-url", url, "--concurrency", str(concurrency), "--max-retries", "3",
            "--no-progress", "--out", str(out), *extra]


def _wait_for(condition, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, \
            f"{getattr(condition, '__name__', 'the condition')} not met within {timeout} s"
        time.sleep(0.01)


def test_kill_9_during_reasks_then_resume_pays_at_most_the_calls_in_flight(tmp_path):
    """The bounded version of bench/kill_resume.py: 66 calls, a third of them re-asked, cache
    off, kill -9 mid-run, --resume: paid completions <= distinct bodies + concurrency."""
    from ..fault_server import replicate_examples

    data = replicate_examples(EXAMPLES, tmp_path / "data", 3)
    out = tmp_path / "run"
    faults = FaultConfig(latency=0.05, seed=11, transient_attempts=2,
                         rates={"invalid_once": 0.3, "invalid": 0.05, "http_500": 0.05})
    with FaultServer(faults) as server:
        process = subprocess.Popen(_evaluate_command(data, server.url, out, "--no-cache"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: server.snapshot(bodies=False)["reasks_completed"] >= 4)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        killed = server.snapshot(bodies=False)
        assert killed["completed"] < 66, "the run must be cut off midway"
        resumed = subprocess.run(_evaluate_command(data, server.url, out, "--no-cache",
                                                   "--resume"),
                                 capture_output=True, text=True, timeout=180)
        assert resumed.returncode in (0, 1), resumed.stderr
        stats = server.snapshot()
    assert stats["completed"] <= stats["distinct_bodies"] + 4
    twice = [b for b in stats["bodies"].values() if b["completed"] > 1]
    assert len(twice) <= 4 and all(b["completed"] == 2 for b in twice)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["turns"] == 33 == summary["scored_turns"] + summary["error_turns"]


def test_sigterm_stops_sending_and_records_the_calls_in_flight(tmp_path):
    out = tmp_path / "run"
    data = (EXAMPLES / "schema.json", EXAMPLES / "dialogues.jsonl",
            EXAMPLES / "predictions.jsonl")
    with FaultServer(FaultConfig(latency=1.0)) as server:
        process = subprocess.Popen(_evaluate_command(data, server.url, out, "--no-cache",
                                                     "--stop-grace", "20"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: server.snapshot(bodies=False)["total"] >= 4)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        stopped = server.snapshot(bodies=False)
        from judge.store import SQLiteLedger

        ledger = SQLiteLedger(out / "ledger.sqlite3")
        recorded = ledger.stats()
        ledger.close()
        logged = (out / "calls.jsonl").read_text().splitlines()
        resumed = subprocess.run(_evaluate_command(data, server.url, out, "--no-cache",
                                                   "--resume"),
                                 capture_output=True, text=True, timeout=120)
        stats = server.snapshot(bodies=False)
    assert process.returncode == 143, err
    assert "SIGTERM" in err and "--resume" in err and "Traceback" not in err
    assert stopped["total"] < 22  # no new sends after the signal
    assert recorded["replies"] == stopped["completed"] and recorded["pending"] == 0
    assert len(logged) == stopped["completed"]  # every call in flight finished and was logged
    assert resumed.returncode == 0, resumed.stderr
    assert stats["completed"] == stats["distinct_bodies"] == 22  # nothing paid twice


def test_two_processes_sharing_a_cache_pay_once_for_identical_requests(tmp_path):
    """Two runs of the same inputs at the same moment, one cache directory: a request the
    other process is sending is awaited, not sent again."""
    data = (EXAMPLES / "schema.json", EXAMPLES / "dialogues.jsonl",
            EXAMPLES / "predictions.jsonl")
    cache = ["--cache-dir", str(tmp_path / "cache")]
    with FaultServer(FaultConfig(latency=0.5)) as server:
        runs = [subprocess.Popen(_evaluate_command(data, server.url, tmp_path / name, *cache,
                                                   concurrency=2),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for name in ("a", "b")]
        errors = [run.communicate(timeout=180)[1] for run in runs]
        stats = server.snapshot(bodies=False)
    assert [run.returncode for run in runs] == [0, 0], errors
    assert stats["completed"] == stats["distinct_bodies"] == 22
    summaries = [json.loads((tmp_path / n / "summary.json").read_text()) for n in "ab"]
    assert sum(s["calls"]["sent"] for s in summaries) == 22
    verdicts = [[json.loads(line)["verdict"] for line in
                 (tmp_path / n / "judgments.jsonl").read_text().splitlines()] for n in "ab"]
    assert verdicts[0] == verdicts[1]
