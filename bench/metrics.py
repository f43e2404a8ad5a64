"""Benchmark: the whole exact-match suite for the three shared systems on the full test set.

Prints load time, compute time per system (best of N runs, breakdowns included) and the peak
resident memory of the process. Target (issue 2): under 1 s per system, under 300 MB peak.

    python bench/metrics.py [--data ../shared/data/multiwoz] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _common import peak_rss_mb, write_results  # the script's own folder is on sys.path

from judge import MetricOptions, compute_metrics, load_dialogues, load_predictions, load_schema

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "multiwoz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no data at {args.data}; pass --data DIR (the shared MultiWOZ folder)")
        return 1
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core

    start = time.perf_counter()
    schema = load_schema(args.data / "schema.json")
    dialogues = load_dialogues(args.data / "dialogues.jsonl.gz")
    load_dialogues_s = time.perf_counter() - start
    print(f"dialogues: {len(dialogues)} dialogues, {dialogues.num_turns} turns, "
          f"loaded in {load_dialogues_s:.3f} s")
    options = MetricOptions()
    rows = []
    for name in ("original", "da", "da-p"):
        start = time.perf_counter()
        system = load_predictions(args.data / "predictions" / f"{name}.jsonl.gz", dialogues, schema)
        load_s = time.perf_counter() - start
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = compute_metrics(dialogues, system, schema, options)
            best = min(best, time.perf_counter() - start)
        jga = report.systems[0].metrics["jga"]
        print(f"{name:9s} load {load_s:.3f} s  suite {best:.3f} s (best of {args.repeat})  "
              f"total {load_s + best:.3f} s  JGA {jga:.2f}")
        rows.append([name, f"{load_s:.2f}", f"{best:.2f}", f"{jga:.2f}"])
    print(f"peak RSS: {peak_rss_mb():.0f} MB")
    write_results("metrics", [{
        "title": "The exact-match suite on the MultiWOZ test set (one core)",
        "columns": ["system", "predictions load (s)", f"suite (s, best of {args.repeat})",
                    "JGA vs 2.1 (%)"],
        "rows": rows,
        "note": (f"{dialogues.num_turns:,} turns; dialogues load in {load_dialogues_s:.2f} s; "
                 f"peak RSS {peak_rss_mb():.0f} MB for the whole script."),
    }])
    return 0


if __name__ == "__main__":
    sys.exit(main())
