"""Benchmark: peak memory, wall time and CPU time of ``metrics``, ``report`` and ``audit`` on
the shared MultiWOZ test set replicated R times (default 10: 9,990 dialogues, 73,680 turns)
with two systems (the shared ``original`` and ``da`` predictions, replicated the same way).

Each command runs in a fresh process, which reports its own peak RSS (``ru_maxrss``), wall
time and CPU time; the machine is shared, so CPU time is the steadier figure. Goal (issue 43):
each command <= 400 MB at 10x, and the audit page paged rather than one large HTML file.

    python bench/analysis_memory.py [--data ../shared/data/multiwoz] [--copies 10]
        [--commands metrics report audit] [--work DIR] [--no-record]

Run it against another checkout (a "before" figure) with ``--root PATH``: the commands then
import that checkout's code.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (  # the script's own folder is on sys.path
    MEASURE_CLI,
    SHARED_MULTIWOZ,
    write_results,
)

DEFAULT_DATA = SHARED_MULTIWOZ
ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = ("original", "da")



def _copy_id(dialogue_id: str, copy: int) -> str:
    stem = dialogue_id.removesuffix(".json")
    return f"{stem}-r{copy}.json" if dialogue_id.endswith(".json") else f"{stem}-r{copy}"


def _replicate(source: Path, target: Path, copies: int) -> None:
    """``source`` (JSON Lines, gzipped) written ``copies`` times, each copy's ids suffixed."""
    if target.exists():
        return
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    with open(target, "w", encoding="utf-8") as out:
        for copy in range(copies):
            for record in records:
                out.write(json.dumps({**record, "dialogue_id": _copy_id(
                    record["dialogue_id"], copy)}, ensure_ascii=False) + "\n")


def build(data: Path, work: Path, copies: int) -> tuple[Path, list[Path]]:
    folder = work / f"{copies}x"
    folder.mkdir(parents=True, exist_ok=True)
    dialogues = folder / "dialogues.jsonl"
    _replicate(data / "dialogues.jsonl.gz", dialogues, copies)
    systems = []
    for name in SYSTEMS:
        path = folder / f"{name}.jsonl"
        _replicate(data / "predictions" / f"{name}.jsonl.gz", path, copies)
        systems.append(path)
    return dialogues, systems


def measure(root: Path, args: list[str]) -> tuple[float, float, float]:
    """Wall time (s), peak RSS (MB) and CPU time (s) of ``dst-judge ARGS`` in a fresh
    process importing the code under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", MEASURE_CLI, *args], capture_output=True,
                          text=True, env=env, check=False, cwd=root)
    line = next((x for x in done.stderr.splitlines() if x.startswith("@@ ")), None)
    if line is None or line.split()[1] != "0":
        raise SystemExit(f"dst-judge {args[0]} failed:\n{done.stderr[-3000:]}")
    _, _, seconds, peak, cpu = line.split()
    return float(seconds), float(peak), float(cpu)


def _size(path: Path) -> str:
    """The size of a file, readable."""
    size = path.stat().st_size
    return f"{size:,} bytes" if size < 10_000 else f"{size / 1024:,.0f} kB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--commands", nargs="+", default=["metrics", "report", "audit"],
                        choices=["metrics", "report", "audit"])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="checkout whose code runs (default: this one)")
    parser.add_argument("--work", type=Path, default=None,
                        help="scratch folder (default: a temporary one, removed at the end)")
    parser.add_argument("--no-record", action="store_true",
                        help="print only; do not write bench/results/analysis_memory.json")
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no data at {args.data}; pass --data DIR (the shared MultiWOZ folder)")
        return 1
    scratch = None
    if args.work is None:
        scratch = tempfile.TemporaryDirectory(prefix="analysis-memory-")
        args.work = Path(scratch.name)
    start = time.perf_counter()
    dialogues, systems = build(args.data, args.work, args.copies)
    print(f"{args.copies}x set built in {time.perf_counter() - start:.0f} s "
          f"({args.work}); code from {args.root}")
    schema = str(args.data / "schema.json")
    out = args.work / "out"
    if out.exists():
        shutil.rmtree(out)  # pages of an earlier run would be counted
    out.mkdir()
    commands = {
        "metrics": ["metrics", "--schema", schema, "--dialogues", str(dialogues),
                    "--predictions", *map(str, systems), "--json", str(out / "metrics.json")],
        "report": ["report", "--schema", schema, "--dialogues", str(dialogues),
                   "--predictions", *map(str, systems), "--table-out",
                   str(out / "report.csv")],
        "audit": ["audit", *map(str, systems), "--dialogues", str(dialogues), "--schema",
                  schema, "--out", str(out / "audit.html"), "--candidates",
                  str(out / "candidates.jsonl")],
    }
    rows = []
    print(f"{'command':8s} {'wall (s)':>9s} {'CPU (s)':>8s} {'peak RSS (MB)':>14s}  output")
    for name in args.commands:
        seconds, peak, cpu = measure(args.root, commands[name])
        if name == "audit":
            sizes = [p.stat().st_size / 2**20 for p in out.iterdir()
                     if p.name.startswith("audit") and p.suffix == ".html"]
            output = (f"{len(sizes)} page(s), largest {max(sizes):.1f} MB, "
                      f"together {sum(sizes):.1f} MB")
        else:
            output = _size(out / ("metrics.json" if name == "metrics" else "report.csv"))
        print(f"{name:8s} {seconds:9.1f} {cpu:8.1f} {peak:14.0f}  {output}  "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        rows.append([name, f"{seconds:.0f}", f"{cpu:.0f}", f"{peak:.0f}", output])
    if not args.no_record:
        write_results("analysis_memory", [{
            "title": f"metrics, report and audit on the {args.copies}x set "
                     f"({args.copies * 999:,} dialogues, two systems): one process each",
            "columns": ["command", "wall time (s)", "CPU time (s)", "peak RSS (MB)", "output"],
            "rows": rows,
            "note": ("Goal: each command <= 400 MB at 10x. Before this work (the same script "
                     "with --root on the earlier checkout): metrics 871 MB, report 871 MB, "
                     "audit 840 MB with one 21.9 MB page.")}])
    if scratch is not None:
        scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
