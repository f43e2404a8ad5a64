"""Benchmark: queue-to-start latency on Postgres, from an API-only replica (``dst-judge serve
--no-worker``) to a separate ``dst-judge worker``, with LISTEN/NOTIFY wake-ups and with
polling only (``--no-listen``, one look every 0.5 s).

Each job is a small ``metrics`` job (no model), submitted when the worker is idle; its latency
is ``started_at − created_at`` as the server records them (both stamped by processes on this
machine, to the millisecond). A warm-up job runs first in each mode.

    python bench/service_wakeup.py [--jobs 30]

Prints median, 90th percentile and maximum per mode and writes them to
``bench/results/service_wakeup.json`` (the docs render that file).
"""

from __future__ import annotations

import argparse
import calendar
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, write_results  # noqa: E402

import judge  # noqa: E402
from tests.service.serve_process import (  # noqa: E402
    EXAMPLES,
    ServeProcess,
    WorkerCommand,
    create_token,
    running_postgres,
)


def _seconds(stamp: str) -> float:
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(stamp[19:-1])


def _latencies(client: judge.Client, inputs: dict[str, Any], jobs: int) -> list[float]:
    """Submit ``jobs`` + 1 metrics jobs one after another (each once the last has ended);
    the queue-to-start latency of all but the warm-up, in milliseconds."""
    out = []
    for index in range(jobs + 1):
        job = client.submit("metrics", inputs, {})
        done = client.wait(job.id, timeout=120, poll=0.05)
        if done.status != "succeeded":
            raise RuntimeError(f"job {job.id} {done.status}: {done.error}")
        if index:
            out.append(1000 * (_seconds(done.started_at or "") - _seconds(done.created_at)))
    return out


def _mode(db: str, folder: Path, token: str, jobs: int, listen: bool) -> dict[str, Any]:
    args = ["--jobs", "1"] + ([] if listen else ["--no-listen"])
    name = "listen" if listen else "poll"
    with ServeProcess(folder / f"api-{name}", db=db, args=["--no-worker"],
                      max_seconds=900) as api, \
            WorkerCommand(folder / f"worker-{name}", db=db, args=args, max_seconds=900):
        client = judge.Client(api.url, token)
        inputs = {"schema": client.upload(EXAMPLES / "schema.json", "schema").id,
                  "dialogues": client.upload(EXAMPLES / "dialogues.jsonl", "dialogues").id,
                  "predictions": [client.upload(EXAMPLES / "predictions.jsonl",
                                                "predictions").id]}
        values = _latencies(client, inputs, jobs)
    values.sort()
    return {"mode": name, "jobs": len(values),
            "median_ms": round(statistics.median(values), 1),
            "p90_ms": round(values[int(0.9 * (len(values) - 1))], 1),
            "max_ms": round(values[-1], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    args = parser.parse_args()
    local_only()
    results = []
    with running_postgres() as db, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        token = create_token(folder / "tokens", "bench", db=db)
        for listen in (True, False):
            result = _mode(db, folder, token, args.jobs, listen)
            results.append(result)
            print(f"{result['mode']:>6}: median {result['median_ms']} ms, p90 "
                  f"{result['p90_ms']} ms, max {result['max_ms']} ms over {result['jobs']} jobs")
    write_results("service_wakeup", [{
        "title": "Queue-to-start latency on Postgres, API-only replica → separate worker",
        "columns": ["wake-up", "jobs", "median (ms)", "90th percentile (ms)", "max (ms)"],
        "rows": [[r["mode"], r["jobs"], r["median_ms"], r["p90_ms"], r["max_ms"]]
                 for r in results],
        "note": "listen: LISTEN/NOTIFY; poll: --no-listen, one look every 0.5 s. "
                "Target: median below 50 ms with notifications."}])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
