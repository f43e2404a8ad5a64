"""kill -9 in the middle of a run, then --resume: no call that was logged as finished is sent
again (the fault server counts every request body), and the resumed run is complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from judge import load_config, load_dialogues, load_predictions, load_schema, plan_evaluation

from ..conftest import EXAMPLES
from ..fault_server import FaultConfig, FaultServer, body_hash


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
    with FaultServer(FaultConfig(latency=0.15, seed=3)) as server:
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
