"""Benchmark: ``dst-judge leaderboard`` at leaderboard scale — time and peak memory.

Builds, in a scratch folder, the shared MultiWOZ test set replicated R times (each copy's
dialogue ids suffixed, so 10x is 9,990 dialogues and 73,680 turns) and S systems that are
perturbed copies of the three shared systems (each dialogue's predictions taken from one of
the three at random, with a system-specific mix, and a few slots dropped), then runs the
command in a fresh process per configuration and reads that process's own peak RSS.

Goals (issue 43, on 2 cores): 50 systems on 10x in <= 10 min and <= 1.5 GB; 10 systems on
100x <= 2 GB; peak memory grows <= 25 % from 10 to 50 systems.

    python bench/leaderboard_scale.py [--data ../shared/data/multiwoz] [--work DIR]
        [--configs 10x10 10x50 100x10 10x10whole] [--gold 2.4]

``10x10whole`` runs the same 10 systems through the path that loads the dialogues whole
(``--limit`` set to every dialogue), for comparison with the default reading in step.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import (  # the script's own folder is on sys.path
    MEASURE_CLI,
    SHARED_MULTIWOZ,
    write_results,
)

DEFAULT_DATA = SHARED_MULTIWOZ
ROOT = Path(__file__).resolve().parents[1]
SHARED_SYSTEMS = ("original", "da", "da-p")



def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _copy_id(dialogue_id: str, copy: int) -> str:
    stem = dialogue_id.removesuffix(".json")
    return f"{stem}-r{copy}.json" if dialogue_id.endswith(".json") else f"{stem}-r{copy}"


def build(data: Path, work: Path, copies: int, systems: int) -> tuple[Path, list[Path]]:
    """The replicated dialogues file and ``systems`` predictions files (reused if there)."""
    folder = work / f"{copies}x"
    folder.mkdir(parents=True, exist_ok=True)
    dialogues_path = folder / "dialogues.jsonl"
    if not dialogues_path.exists():
        dialogues = _read(data / "dialogues.jsonl.gz")
        with open(dialogues_path, "w", encoding="utf-8") as out:
            for copy in range(copies):
                for record in dialogues:
                    out.write(json.dumps({**record, "dialogue_id": _copy_id(
                        record["dialogue_id"], copy)}, ensure_ascii=False) + "\n")
    shared = {name: _read(data / "predictions" / f"{name}.jsonl.gz") for name in SHARED_SYSTEMS}
    paths = []
    for s in range(systems):
        path = folder / f"sys{s:02d}.jsonl"
        paths.append(path)
        if path.exists():
            continue
        rng = np.random.default_rng(1000 + s)
        base = s % 3
        mix = np.roll(np.array([0.8 - 0.01 * (s % 20), 0.1, 0.1 + 0.01 * (s % 20)]), base)
        drop = 0.005 * (s // 3 % 5)
        with open(path, "w", encoding="utf-8") as out:
            for copy in range(copies):
                sources = rng.choice(3, size=len(shared["original"]), p=mix / mix.sum())
                for position, source in enumerate(sources):
                    record = shared[SHARED_SYSTEMS[source]][position]
                    turns = []
                    for turn in record["turns"]:
                        state = dict(turn["pred_state"])
                        if state and rng.random() < drop:
                            state.pop(sorted(state)[int(rng.integers(len(state)))])
                        turns.append({"turn_index": turn["turn_index"], "pred_state": state})
                    out.write(json.dumps({"dialogue_id": _copy_id(record["dialogue_id"], copy),
                                          "system_name": f"sys{s:02d}", "turns": turns},
                                         ensure_ascii=False) + "\n")
    return dialogues_path, paths


def measure(args: list[str]) -> tuple[float, float, float]:
    """Wall time, peak RSS (MB) and CPU time of ``dst-judge`` run in a fresh process (on a
    shared machine the CPU time is the steadier figure)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", MEASURE_CLI, *args], capture_output=True,
                          text=True, env=env, check=False)
    line = next((x for x in done.stderr.splitlines() if x.startswith("@@ ")), None)
    if line is None or line.split()[1] != "0":
        raise SystemExit(f"dst-judge failed:\n{done.stderr[-3000:]}")
    _, _, seconds, peak, cpu = line.split()
    return float(seconds), float(peak), float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a "
                        "temporary one, removed at the end)")
    parser.add_argument("--configs", nargs="+", default=["10x10", "10x50", "100x10",
                                                         "10x10whole"])
    parser.add_argument("--gold", nargs="+", default=["2.4"])
    args = parser.parse_args()
    if not (args.data / "dialogues.jsonl.gz").exists():
        print(f"no data at {args.data}; pass --data DIR (the shared MultiWOZ folder)")
        return 1
    scratch = None
    if args.work is None:
        scratch = tempfile.TemporaryDirectory(prefix="leaderboard-scale-")
        args.work = Path(scratch.name)
    rows = []
    peaks: dict[str, float] = {}
    for config in args.configs:
        whole = config.endswith("whole")
        copies, systems = (int(x) for x in config.removesuffix("whole").split("x"))
        start = time.perf_counter()
        dialogues, paths = build(args.data, args.work, copies, systems)
        built = time.perf_counter() - start
        out = args.work / f"board-{config}.json"
        command = ["leaderboard", *map(str, paths), "--schema", str(args.data / "schema.json"),
                   "--dialogues", str(dialogues), "--gold", *args.gold, "--json", str(out)]
        if whole:
            command += ["--limit", str(999 * copies)]
        seconds, peak, cpu = measure(command)
        board = json.loads(out.read_text(encoding="utf-8"))
        turns = board["method"]["turns"]
        peaks[config] = peak
        reading = board["method"]["reading"]
        print(f"{config:11s} {systems:3d} systems  {turns:7d} turns  {seconds:7.1f} s  "
              f"CPU {cpu:7.1f} s  peak {peak:6.0f} MB  ({reading}; data built in "
              f"{built:.0f} s; load {os.getloadavg()[0]:.1f})")
        rows.append([f"{copies}x", str(systems), f"{turns:,}", reading, f"{seconds:.0f}",
                     f"{cpu:.0f}", f"{peak:.0f}"])
    note = ""
    if "10x10" in peaks and "10x50" in peaks:
        growth = 100 * (peaks["10x50"] / peaks["10x10"] - 1)
        note = f"Peak memory from 10 to 50 systems on 10x: {growth:+.0f} %."
        print(note)
    write_results("leaderboard_scale", [{
        "title": "dst-judge leaderboard at scale: time and peak memory (one process each, "
                 f"gold {' '.join(args.gold)}, breakdowns included)",
        "columns": ["test set", "systems", "turns", "reading", "wall time (s)", "CPU time (s)",
                    "peak RSS (MB)"],
        "rows": rows,
        "note": ("Goals: 50 systems on 10x <= 10 min and <= 1.5 GB; 10 systems on 100x <= "
                 "2 GB; <= 25 % more memory from 10 to 50 systems. " + note).strip()}])
    if scratch is not None:
        scratch.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
