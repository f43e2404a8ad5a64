"""Benchmark: judge the full MultiWOZ test set (7,368 turns) for one system with the store on
(the ledger in a fresh cache directory, a run directory with its log and manifest), then
re-run it from the ledger.

The server (tests/fault_server.py, a subprocess: its CPU and memory are not ours) answers in a
few milliseconds, so the run measures the judge's own cost at scale: wall time, calls, peak
memory. The re-run must be answered entirely from the ledger the first run filled.
Targets: peak RSS < 400 MB; cached re-run < 10 s and zero requests at the server.

    python bench/judge_full_run.py [--data ../shared/data/multiwoz] [--system original]
                                   [--latency 0.005] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import current_rss_mb, local_only, peak_rss_mb, write_results  # noqa: E402

import judge  # noqa: E402 - after the path set-up that makes tests/ importable
from tests.fault_server import FaultConfig, ServerProcess  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "multiwoz"
PEAK_TARGET_MB = 400.0
CACHED_TARGET_S = 10.0



def _run(label: str, config: Any, data: tuple[Any, Any, Any], server: ServerProcess,
         out_dir: Path) -> tuple[Any, float, float, dict[str, Any]]:
    server.reset()
    start, cpu = time.perf_counter(), time.process_time()
    result = judge.evaluate(config, *data, out_dir=out_dir)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = server.snapshot(bodies=False)
    calls = result.summary["calls"]
    print(f"{label}: {wall:.2f} s wall, {cpu:.2f} s client CPU; turns {result.summary['turns']}"
          f", error turns {result.summary['error_turns']}; calls planned {calls['planned']}, "
          f"sent {calls['sent']}, cache hits {calls['cache_hits']}; server received "
          f"{stats['total']} over {stats['connections']} connection(s); RSS now "
          f"{current_rss_mb():.0f} MB, peak {peak_rss_mb():.0f} MB", flush=True)
    if stats["total"] != calls["sent"]:
        print(f"  !! the server received {stats['total']} requests, the client reports "
              f"{calls['sent']}")
    return result, wall, cpu, stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--system", default="original", help="predictions/<system>.jsonl.gz")
    parser.add_argument("--latency", type=float, default=0.005)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    predictions_path = args.data / "predictions" / f"{args.system}.jsonl.gz"
    if not (args.data / "dialogues.jsonl.gz").exists() or not predictions_path.exists():
        print(f"skipped: no MultiWOZ data at {args.data} (the shared data of the development "
              "workspace); pass --data DIR")
        return 0
    local_only()
    start = time.perf_counter()
    schema = judge.load_schema(args.data / "schema.json")
    dialogues = judge.load_dialogues(args.data / "dialogues.jsonl.gz")
    predictions = judge.load_predictions(predictions_path, dialogues, schema)
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; data: {len(dialogues)} "
          f"dialogues, {dialogues.num_turns} turns, system {args.system!r}, loaded in "
          f"{time.perf_counter() - start:.2f} s; RSS {current_rss_mb():.0f} MB")
    print(f"server: subprocess, latency {args.latency * 1000:g} ms, no faults; concurrency "
          f"{args.concurrency}; fresh cache dir", flush=True)
    data = (schema, dialogues, predictions)
    with tempfile.TemporaryDirectory(prefix="dst-judge-full-") as cache_dir, \
            ServerProcess(FaultConfig(latency=args.latency), max_seconds=3600) as server:
        config = judge.load_config({"model": "bench", "base_url": server.url,
                                    "cache_dir": cache_dir, "use_cache": True,
                                    "concurrency": args.concurrency, "timeout": 60.0})
        runs = Path(cache_dir) / "runs"
        first, first_wall, first_cpu, first_stats = _run(
            "run 1 (cache empty)", config, data, server, runs / "first")
        # keep what the comparison needs, not the whole first result: the figure is the peak
        # of one run, not of two results held at once
        first_verdicts = [r["verdict"] for r in first.rows]
        calls = first.summary["calls"]["sent"]
        planned = first.summary["calls"]["planned"]
        del first
        gc.collect()
        second, second_wall, second_cpu, second_stats = _run(
            "run 2 (cached)     ", config, data, server, runs / "second")
        ledger_mb = sum(p.stat().st_size for p in Path(cache_dir).glob("ledger.sqlite3*"))
        run_mb = sum(p.stat().st_size for p in (runs / "first").iterdir())
        print(f"ledger: {ledger_mb / 2**20:.0f} MB on disk; run directory: {run_mb / 2**20:.0f}"
              " MB (calls.jsonl, judgments.jsonl, summary, manifest)")
    peak = peak_rss_mb()
    same = first_verdicts == [r["verdict"] for r in second.rows]
    print(f"\ncalls: {calls} (run 1, {calls / first_wall:.0f} calls/s); wall: run 1 "
          f"{first_wall:.2f} s, cached run {second_wall:.2f} s; peak RSS {peak:.0f} MB; "
          f"cached run: {second_stats['total']} request(s) at the server, "
          f"{second.summary['calls']['sent']} sent by the client; same verdicts: {same}")
    missed = []
    if peak >= PEAK_TARGET_MB:
        missed.append(f"peak RSS {peak:.0f} MB (target < {PEAK_TARGET_MB:.0f} MB)")
    if second_wall >= CACHED_TARGET_S:
        missed.append(f"cached re-run {second_wall:.2f} s (target < {CACHED_TARGET_S:.0f} s)")
    if second_stats["total"] or second.summary["calls"]["sent"]:
        missed.append(f"cached re-run sent {second_stats['total']} request(s) (target 0)")
    if first_stats["total"] != calls:
        missed.append("server and client request counts differ")
    if not same:
        missed.append("the cached run's verdicts differ from the first run's")
    print("TARGETS MISSED:\n  " + "\n  ".join(missed) if missed else
          f"targets met: peak RSS < {PEAK_TARGET_MB:.0f} MB, cached re-run < "
          f"{CACHED_TARGET_S:.0f} s with zero requests")
    verdict = ("targets missed: " + "; ".join(missed)) if missed else "targets met"
    write_results("judge_full_run", [{
        "title": (f"The full MultiWOZ test set, system {args.system}: {dialogues.num_turns:,} "
                  f"turns, {planned:,} planned calls, {args.latency * 1000:g} ms latency, "
                  f"concurrency {args.concurrency}, store on"),
        "columns": ["run", "wall (s)", "client CPU (s)", "requests sent", "requests at the server"],
        "rows": [["first (empty cache)", f"{first_wall:.1f}", f"{first_cpu:.1f}", f"{calls:,}",
                  f"{first_stats['total']:,}"],
                 ["re-run (from the ledger)", f"{second_wall:.1f}", f"{second_cpu:.1f}",
                  f"{second.summary['calls']['sent']:,}", f"{second_stats['total']:,}"]],
        "note": (f"Peak RSS {peak:.0f} MB; ledger {ledger_mb / 2**20:.0f} MB on disk, run "
                 f"directory {run_mb / 2**20:.0f} MB; the re-run's verdicts "
                 f"{'equal' if same else 'DIFFER FROM'} the first run's. Targets: peak RSS < "
                 f"{PEAK_TARGET_MB:.0f} MB, cached re-run < {CACHED_TARGET_S:.0f} s with zero "
                 f"requests: {verdict}."),
    }], system=args.system)
    return 0


if __name__ == "__main__":
    sys.exit(main())
