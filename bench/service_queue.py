"""Benchmark: 100 jobs queued at once on one ``dst-judge serve`` (SQLite), against a fake model
with a fixed latency (tests/fault_server.py as a subprocess).

Each job judges the project's example dialogues with predictions of its own (values changed
at random per job, so a shared cache cannot answer them all). While the queue drains, reader
threads poll ``GET /v1/jobs/{id}`` and ``GET /v1/jobs`` as clients and a web page would.

Prints: how many jobs succeeded; API latency percentiles under that load (target: p99 < 50
ms); and the server overhead per job: job wall time (started → finished, on the server) over
the fake model's own time for the job's calls at the job's concurrency (waves × latency) minus
one (target < 5 %), next to the same ratio for a direct library run in this process.

    python bench/service_queue.py [--jobs 100] [--latency 0.3] [--slots 8] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only  # noqa: E402

import judge  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess  # noqa: E402
from tests.service.serve_process import ServeProcess, create_token  # noqa: E402

EXAMPLES = ROOT / "examples"
P99_TARGET_MS = 50.0
OVERHEAD_TARGET = 0.05


def generate_predictions(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """``count`` predictions files: the example's turn states with values changed at random."""
    rows = [json.loads(line) for line in
            (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    paths = []
    for index in range(count):
        rng = random.Random(seed * 100_003 + index)
        out = []
        for row in rows:
            turns = []
            for turn in row["turns"]:
                state = dict(turn.get("pred_turn_state") or {})
                for slot in list(state):
                    if rng.random() < 0.6:
                        state[slot] = f"{state[slot]} {rng.randint(1, 999)}"
                turns.append({"turn_index": turn["turn_index"], "pred_turn_state": state})
            out.append(json.dumps({"dialogue_id": row["dialogue_id"],
                                   "system_name": f"system-{index:03d}", "turns": turns}))
        path = folder / f"predictions-{index:03d}.jsonl"
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[rank]


def poll_load(url: str, token: str, ids: list[str], stop: threading.Event, interval: float,
              latencies: dict[str, list[float]]) -> None:
    client = judge.Client(url, token)
    rng = random.Random(threading.get_ident())
    while not stop.is_set():
        started = time.perf_counter()
        if rng.random() < 0.8:
            client.job(rng.choice(ids))
            kind = "GET /v1/jobs/{id}"
        else:
            client.jobs(limit=50)
            kind = "GET /v1/jobs"
        latencies.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        time.sleep(interval)
    client.close()


def parse_time(text: str) -> float:
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + float(text[19:-1] or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--slots", type=int, default=8, help="jobs the server runs at once")
    parser.add_argument("--concurrency", type=int, default=4, help="calls in flight per job")
    parser.add_argument("--readers", type=int, default=4, help="polling client threads")
    parser.add_argument("--poll", type=float, default=0.1, help="seconds between a reader's "
                        "requests (4 readers at 0.1 s: ~40 requests/s)")
    args = parser.parse_args()
    local_only()
    folder = Path(tempfile.mkdtemp(prefix="dstj-bench-"))
    predictions = generate_predictions(folder, args.jobs)
    data = folder / "server"
    token = create_token(data, "bench")
    with ServerProcess(FaultConfig(latency=args.latency), max_seconds=3600) as model:
        endpoints = {"fake": {"base_url": model.url, "max_concurrency": 64}}
        server = ServeProcess(data, endpoints=endpoints, max_seconds=3600,
                              args=["--jobs", str(args.slots)])
        with server:
            client = judge.Client(server.url, token)
            common = {"schema": client.upload(EXAMPLES / "schema.json", "schema")["id"],
                      "dialogues": client.upload(EXAMPLES / "dialogues.jsonl",
                                                 "dialogues")["id"]}
            files = [client.upload(p, "predictions")["id"] for p in predictions]
            submit_ms: list[float] = []
            ids: list[str] = []
            began = time.monotonic()
            for file_id in files:
                started = time.perf_counter()
                ids.append(client.submit("evaluate", {**common, "predictions": file_id},
                                         {"model": "m", "concurrency": args.concurrency})["id"])
                submit_ms.append((time.perf_counter() - started) * 1000)
            stop = threading.Event()
            latencies: dict[str, list[float]] = {"POST /v1/jobs": submit_ms}
            readers = [threading.Thread(target=poll_load, args=(server.url, token, ids, stop,
                                                                 args.poll, latencies),
                                        daemon=True)
                       for _ in range(args.readers)]
            for thread in readers:
                thread.start()
            finished = [client.wait(job_id, timeout=3600, poll=1.0) for job_id in ids]
            drained = time.monotonic() - began
            stop.set()
            for thread in readers:
                thread.join(10)
            stats = model.snapshot(bodies=False)
        baseline = direct_run(model.url, predictions[0], args.concurrency)

    ok = sum(1 for j in finished if j["status"] == "succeeded")
    print(f"{args.jobs} jobs queued at once on SQLite; server runs {args.slots} at a time, "
          f"{args.concurrency} calls in flight each; fake model {args.latency * 1000:.0f} ms")
    print(f"succeeded: {ok}/{len(finished)}; queue drained in {drained:.1f} s; model saw "
          f"{stats['completed']} completions for {stats['distinct_bodies']} distinct bodies")
    print("\nAPI latency under load (ms):")
    print(f"  {'request':<22}{'n':>7}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
    every: list[float] = []
    for kind, values in latencies.items():
        every.extend(values)
        print(f"  {kind:<22}{len(values):>7}{percentile(values, 50):>9.1f}"
              f"{percentile(values, 95):>9.1f}{percentile(values, 99):>9.1f}"
              f"{max(values):>9.1f}")
    p99 = percentile(every, 99)
    print(f"  {'all':<22}{len(every):>7}{percentile(every, 50):>9.1f}"
          f"{percentile(every, 95):>9.1f}{p99:>9.1f}{max(every):>9.1f}")
    print(f"  p99 target < {P99_TARGET_MS:.0f} ms: {'met' if p99 < P99_TARGET_MS else 'MISSED'}")
    overheads = []
    for job in finished:
        calls = job["progress"]["total"] or 0
        waves = math.ceil(calls / args.concurrency)
        model_time = waves * args.latency
        wall = parse_time(job["finished_at"]) - parse_time(job["started_at"])
        if model_time:
            overheads.append(wall / model_time - 1)
    median = statistics.median(overheads)
    print(f"\nserver overhead per job (job wall / model time at concurrency "
          f"{args.concurrency} - 1): median {median * 100:.1f} %, p90 "
          f"{percentile(overheads, 90) * 100:.1f} %, max {max(overheads) * 100:.1f} %; "
          f"target < {OVERHEAD_TARGET * 100:.0f} %: "
          f"{'met' if median < OVERHEAD_TARGET else 'MISSED'}")
    print(f"direct library run of one job (same concurrency, this process): "
          f"{baseline['wall']:.3f} s for {baseline['calls']} calls = model time "
          f"{baseline['model_time']:.3f} s + {baseline['overhead'] * 100:.1f} %")
    return 0 if ok == len(finished) else 1


def direct_run(url: str, predictions: Path, concurrency: int) -> dict[str, Any]:
    schema = judge.load_schema(EXAMPLES / "schema.json")
    dialogues = judge.load_dialogues(EXAMPLES / "dialogues.jsonl")
    system = judge.load_predictions(predictions, dialogues, schema)
    config = judge.load_config({"base_url": url, "model": "m", "use_cache": False,
                                "concurrency": concurrency, "api_key": "sk-bench"})
    latency = None
    started = time.perf_counter()
    result = judge.evaluate(config, schema, dialogues, system)
    wall = time.perf_counter() - started
    calls = result.summary["calls"]["planned"]
    latency = float(sys.argv[sys.argv.index("--latency") + 1]) if "--latency" in sys.argv \
        else 0.3
    model_time = math.ceil(calls / concurrency) * latency
    return {"wall": wall, "calls": calls, "model_time": model_time,
            "overhead": wall / model_time - 1}


if __name__ == "__main__":
    sys.exit(main())
