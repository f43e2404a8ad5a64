"""Benchmark: judge throughput and client CPU per call against a server with fixed latency.

A real judge endpoint answers in hundreds of milliseconds, so throughput comes from keeping
``concurrency`` requests in flight. This script starts tests/fault_server.py as a subprocess
(300 ms per request, no faults; its CPU is not ours), judges tagged copies of the examples with
the cache off at several concurrency levels and prints turns/s, calls/s, the share of the
ideal rate (concurrency / latency) and the client's CPU time per call.
Targets: >= 80 % of ideal up to concurrency 32; < 2 ms client CPU per call.

    python bench/judge_throughput.py [--latency 0.3] [--concurrency 1 8 32 64] [--waves 20]
                                     [--backend aiohttp|httpx] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, write_results  # noqa: E402

import judge  # noqa: E402 - after the path set-up that makes tests/ importable
from judge.pipeline import plan_evaluation  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess, replicate_examples  # noqa: E402

IDEAL_TARGET = 0.80
IDEAL_UP_TO = 32
CPU_TARGET_MS = 2.0
MIN_CALLS = 100
Data = tuple[Any, Any, Any]
LEGEND = """\
%ideal: calls/s over the whole evaluate() call / (concurrency / latency); %win: the same over
the window with calls in flight (first request to last + latency); start s: from evaluate() to
the first request (planning); CPU ms/call: client process CPU / calls, planning included
('marg.': the cost of one more call, without the per-run set-up; 'plan': planning's share);
conns: TCP connections that carried requests; srv ms: server CPU per call (not ours)."""


@dataclass
class Run:
    """The figures of one concurrency level."""

    concurrency: int
    latency: float
    turns: int
    calls: int
    wall: float
    cpu: float
    plan_cpu: float
    to_first: float  # from the start of evaluate() to the server's first request
    window: float  # first request to last request + one latency: calls in flight
    connections: int
    server_cpu: float
    errors: int

    @property
    def ideal(self) -> float:
        return self.concurrency / self.latency

    @property
    def share(self) -> float:
        return self.calls / self.wall / self.ideal

    @property
    def window_share(self) -> float:
        return self.calls / self.window / self.ideal

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.cpu / self.calls


def _data(work: Path, copies: int) -> Data:
    schema_path, d_path, p_path = replicate_examples(ROOT / "examples", work / "data", copies)
    schema = judge.load_schema(schema_path)
    dialogues = judge.load_dialogues(d_path)
    return schema, dialogues, judge.load_predictions(p_path, dialogues, schema)


def _subset(data: Data, config: Any, calls: int) -> Data:
    """The first dialogues that together plan at least ``calls`` calls."""
    schema, dialogues, predictions = data
    plan = plan_evaluation(config, schema, dialogues, predictions)
    per_dialogue = Counter(call.dialogue_id for call in plan.calls)  # in dialogue order
    ids: list[str] = []
    count = 0
    for dialogue_id, n in per_dialogue.items():
        if count >= calls:
            break
        ids.append(dialogue_id)
        count += n
    return schema, dialogues.subset(ids), predictions


def _config(url: str, concurrency: int, cache_dir: Path, backend: str) -> Any:
    return judge.load_config({"model": "bench", "base_url": url, "use_cache": False,
                              "cache_dir": str(cache_dir), "concurrency": concurrency,
                              "timeout": 30.0, "http_backend": backend})


def measure(server: ServerProcess, data: Data, concurrency: int, calls: int, latency: float,
            cache_dir: Path, backend: str) -> Run:
    """One evaluation at one concurrency level (planning CPU is also measured on its own)."""
    config = _config(server.url, concurrency, cache_dir, backend)
    subset = _subset(data, config, calls)
    cpu = time.process_time()
    plan_evaluation(config, *subset)
    plan_cpu = time.process_time() - cpu
    server.reset()
    before = server.snapshot(bodies=False)["process_cpu_s"]
    start, cpu = time.time(), time.process_time()
    result = judge.evaluate(config, *subset)
    wall, cpu = time.time() - start, time.process_time() - cpu
    stats = server.snapshot(bodies=False)
    sent = result.summary["calls"]["sent"]
    if stats["total"] != sent:
        print(f"  !! server received {stats['total']} requests, the client reports {sent}")
    return Run(concurrency, latency, result.summary["turns"], sent, wall, cpu, plan_cpu,
               to_first=stats["first_request_at"] - start,
               window=stats["last_request_at"] - stats["first_request_at"] + latency,
               connections=stats["connections"], server_cpu=stats["process_cpu_s"] - before,
               errors=result.summary["error_turns"])


def _package(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/judge/" in filename:
        return "judge/" + filename.rsplit("/judge/", 1)[1]
    if filename.startswith("~"):
        return "(built-ins: socket, json, select...)"
    return "stdlib " + Path(filename).name


def profile(server: ServerProcess, data: Data, concurrency: int, calls: int, cache_dir: Path,
            backend: str) -> None:
    """Where the client's time goes in one run: own time per package and the top functions.

    cProfile measures wall time, so the event loop's idle wait (epoll) shows up as time; it
    is listed apart from the rest.
    """
    config = _config(server.url, concurrency, cache_dir, backend)
    subset = _subset(data, config, calls)
    profiler = cProfile.Profile()
    profiler.enable()
    result = judge.evaluate(config, *subset)
    profiler.disable()
    sent = result.summary["calls"]["sent"]
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    idle = sum(v[2] for k, v in raw.items() if "poll" in k[2] and "epoll" in k[2])
    by_package: Counter[str] = Counter()
    for (filename, _line, name), (_cc, _nc, own, _cum, _callers) in raw.items():
        if "poll" in name and "epoll" in name:
            continue
        by_package[_package(filename)] += own
    busy = sum(by_package.values())
    print(f"\n-- cProfile of one run at concurrency {concurrency} ({sent} calls, under the "
          f"profiler's own overhead): {busy:.2f} s busy, {idle:.2f} s idle in epoll --")
    print(f"{'package':45s} {'own s':>7} {'share':>6} {'ms/call':>8}")
    for package, own in by_package.most_common(14):
        print(f"{package:45s} {own:7.3f} {own / busy:6.1%} {1000 * own / sent:8.3f}")
    functions = sorted(((v[2], k) for k, v in raw.items()
                        if not ("poll" in k[2] and "epoll" in k[2])), reverse=True)[:12]
    print(f"\n{'top functions by own time':70s} {'own s':>7} {'calls':>8}")
    for own, (filename, line, name) in functions:
        where = f"{_package(filename)}:{line}({name})"
        print(f"{where[:70]:70s} {own:7.3f} {raw[(filename, line, name)][1]:>8}")


def record(args: argparse.Namespace, runs: list[Run], small: Run, missed: list[str]) -> None:
    """Write the printed figures to bench/results (one file per HTTP backend)."""
    name = "judge_throughput" if args.backend == "aiohttp" else f"judge_throughput-{args.backend}"
    rows = [[run.concurrency, run.calls, f"{run.turns / run.wall:.1f}",
             f"{run.calls / run.wall:.1f}", f"{run.share:.1%}", f"{run.cpu_ms:.2f}",
             f"{1000 * (run.cpu - small.cpu) / max(1, run.calls - small.calls):.2f}",
             run.errors] for run in runs]
    verdict = ("targets missed: " + "; ".join(missed)) if missed else "targets met"
    write_results(name, [{
        "title": (f"Judge throughput, http_backend {args.backend}, "
                  f"{args.latency * 1000:.0f} ms per call, cache off"),
        "columns": ["concurrency", "calls", "turns/s", "calls/s", "% of ideal",
                    "client CPU per call (ms)", "marginal CPU per call (ms)", "error turns"],
        "rows": rows,
        "note": (f"Ideal is concurrency / latency. Client CPU per call counts everything in the "
                 f"client process (planning, rendering, HTTP, parsing, per-run set-up: "
                 f"{1000 * small.cpu:.0f} ms for one small run); the marginal figure leaves the "
                 f"set-up out. Targets: >= {IDEAL_TARGET:.0%} of ideal up to concurrency "
                 f"{IDEAL_UP_TO}, < {CPU_TARGET_MS:g} ms client CPU per call: {verdict}."),
    }], backend=args.backend, latency_s=args.latency)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3, help="server seconds per request")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--waves", type=int, default=20,
                        help="calls per level = concurrency x waves, at least 100 (so that "
                        "per-run set-up does not dominate at low concurrency)")
    parser.add_argument("--backend", choices=("aiohttp", "httpx"), default="aiohttp",
                        help="the judge's http_backend (default aiohttp, the package default)")
    parser.add_argument("--profile", action="store_true",
                        help="profile the client at the highest level even if targets are met")
    args = parser.parse_args()
    local_only()
    targets = {c: max(MIN_CALLS, c * args.waves) for c in args.concurrency}
    with tempfile.TemporaryDirectory(prefix="dst-judge-bench-") as tmp:
        work = Path(tmp)
        data = _data(work, copies=math.ceil(max(targets.values()) / 22) + 1)
        print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; server: subprocess, "
              f"latency {args.latency * 1000:.0f} ms, no faults; cache off; method two-dim; "
              f"http_backend: {args.backend}")
        with ServerProcess(FaultConfig(latency=args.latency), max_seconds=1800) as server:
            # warm-up: imports, template compilation, first sockets
            measure(server, data, 4, 8, args.latency, work / "cache", args.backend)
            small = measure(server, data, 1, 1, args.latency, work / "cache", args.backend)
            print(f"one small evaluate() ({small.calls} calls): {1000 * small.cpu:.0f} ms client "
                  "CPU, mostly per-run set-up; 'marg.' below excludes it")
            print(f"{'conc':>4} {'turns':>5} {'calls':>5} {'wall s':>6} {'turns/s':>7} "
                  f"{'calls/s':>7} {'ideal':>6} {'%ideal':>6} {'%win':>6} {'start s':>7} "
                  f"{'CPU ms/call':>11} {'marg.':>5} {'plan':>5} {'conns':>5} {'srv ms':>6} "
                  f"{'err':>3}")
            runs = []
            for concurrency in args.concurrency:
                run = measure(server, data, concurrency, targets[concurrency], args.latency,
                              work / "cache", args.backend)
                runs.append(run)
                print(f"{run.concurrency:>4} {run.turns:>5} {run.calls:>5} {run.wall:>6.2f} "
                      f"{run.turns / run.wall:>7.1f} {run.calls / run.wall:>7.1f} "
                      f"{run.ideal:>6.1f} {run.share:>6.1%} {run.window_share:>6.1%} "
                      f"{run.to_first:>7.2f} {run.cpu_ms:>11.2f} "
                      f"{1000 * (run.cpu - small.cpu) / max(1, run.calls - small.calls):>5.2f} "
                      f"{1000 * run.plan_cpu / run.calls:>5.2f} {run.connections:>5} "
                      f"{1000 * run.server_cpu / run.calls:>6.2f} {run.errors:>3}", flush=True)
            print(LEGEND)
            missed = []
            for run in runs:
                if run.concurrency <= IDEAL_UP_TO and run.share < IDEAL_TARGET:
                    missed.append(f"concurrency {run.concurrency}: {run.share:.1%} of ideal "
                                  f"(target >= {IDEAL_TARGET:.0%})")
                if run.cpu_ms >= CPU_TARGET_MS:
                    missed.append(f"concurrency {run.concurrency}: {run.cpu_ms:.2f} ms client "
                                  f"CPU per call (target < {CPU_TARGET_MS:g} ms)")
            if missed:
                print("TARGETS MISSED:\n  " + "\n  ".join(missed))
            else:
                print(f"targets met: >= {IDEAL_TARGET:.0%} of ideal up to concurrency "
                      f"{IDEAL_UP_TO}, < {CPU_TARGET_MS:g} ms client CPU per call")
            record(args, runs, small, missed)
            if missed or args.profile:
                top = max(args.concurrency)
                profile(server, data, top, targets[top], work / "cache", args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
