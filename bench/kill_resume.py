"""Benchmark: kill -9 at random moments of a ~1,000-call run with re-asks (cache off), then
``--resume``; count the completions the server was paid for.

Each trial starts ``dst-judge evaluate --no-cache`` in a fresh run directory as a subprocess,
against tests/fault_server.py (a subprocess too) answering with invalid replies that the judge
re-asks (``invalid_once``: right on the re-ask; ``invalid``: wrong again), refusals, truncated
replies, HTTP 500 and 429. Once the run log holds a random share (5-95 %) of the planned calls,
plus a random delay of up to 50 ms, the judge is killed with SIGKILL; ``--resume`` then runs
to the end. The server counts paid completions per request body; the target is

    paid completions <= distinct request bodies + concurrency      (every trial)

and the resumed run's verdicts must equal those of an uninterrupted reference run.
``--kills N`` kills each trial N times before the final resume (bound: + N x concurrency).
``--code DIR`` runs another checkout (e.g. ``/work/main``, the version before the ledger).

    python bench/kill_resume.py [--copies 46] [--trials 10] [--concurrency 8]
                                [--latency 0.02] [--seed 7] [--kills 1] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, write_results  # noqa: E402

from tests.fault_server import FaultConfig, ServerProcess, replicate_examples  # noqa: E402

FAULTS = {"invalid_once": 0.20, "invalid": 0.04, "refusal": 0.01, "truncated": 0.01,
          "http_500": 0.03, "http_429": 0.02}


def _command(code: Path, data: tuple[Path, Path, Path], url: str, out: Path,
             concurrency: int, *extra: str) -> list[str]:
    schema, dialogues, predictions = data
    return [sys.executable, "-m", "judge", "evaluate", "--schema", str(schema),
            "--dialogues", str(dialogues), "--predictions", str(predictions), "--model", "bench",
            "--base-url", url, "--no-cache", "--concurrency", str(concurrency),
            "--max-retries", "4", "--no-progress", "--out", str(out), *extra]


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}


NEUTRAL = Path(tempfile.gettempdir())
"""Working directory of the judge processes: ``python -m`` puts the working directory before
PYTHONPATH, so running from a checkout would import that checkout instead of ``--code``."""


class LogWatch:
    """Counts lines of a growing run log without re-reading it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def count(self) -> int:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return self.lines
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return self.lines


def _kill_when(process: subprocess.Popen[bytes], log: Path, target: int,
               rng: random.Random) -> tuple[int, bool]:
    """SIGKILL the judge once the log holds ``target`` lines (plus a random delay)."""
    watch = LogWatch(log)
    while process.poll() is None and watch.count() < target:
        time.sleep(0.005)
    if process.poll() is not None:
        return watch.count(), False
    time.sleep(rng.uniform(0, 0.05))
    process.send_signal(signal.SIGKILL)
    process.wait()
    return LogWatch(log).count(), True


def _verdicts(out: Path) -> list[Any]:
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    return [(r["dialogue_id"], r["turn_index"], r["verdict"], r["error"]) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=46, help="copies of the 22 example calls")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--kills", type=int, default=1, help="kills per trial before resuming")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to run (PYTHONPATH)")
    args = parser.parse_args()
    local_only()
    rng = random.Random(args.seed)
    code = args.code.resolve()
    check = subprocess.run([sys.executable, "-c", "import judge; print(judge.__file__)"],
                           env=_env(code), cwd=NEUTRAL, capture_output=True, text=True)
    print(f"judge imported from {check.stdout.strip()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="dst-judge-kill-") as tmp_name:
        tmp = Path(tmp_name)
        data = replicate_examples(ROOT / "examples", tmp / "data", args.copies)
        faults = FaultConfig(latency=args.latency, rates=FAULTS, seed=args.seed,
                             transient_attempts=2)
        print(f"code: {code}; {args.copies * 22} planned calls; concurrency "
              f"{args.concurrency}; server latency {args.latency * 1000:g} ms; faults "
              f"{FAULTS}; cache off; {args.kills} kill(s) per trial", flush=True)
        with ServerProcess(faults, max_seconds=7200) as server:
            reference_out = tmp / "reference"
            start = time.perf_counter()
            subprocess.run(_command(code, data, server.url, reference_out, args.concurrency),
                           env=_env(code), check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd=NEUTRAL)
            reference = server.snapshot(bodies=False)
            planned = args.copies * 22
            print(f"reference run (no kill): {time.perf_counter() - start:.1f} s; "
                  f"{reference['completed']} paid completions for "
                  f"{reference['distinct_bodies']} distinct bodies "
                  f"({reference['reask_requests']} re-ask requests)\n", flush=True)
            expected = _verdicts(reference_out)
            header = (f"{'trial':>5} {'killed at (logged calls)':>26} {'paid':>6} "
                      f"{'distinct':>8} {'excess':>6} {'bound':>6} {'ok':>3} {'same':>5}")
            print(header)
            results = []
            rows: list[list[Any]] = []
            for trial in range(1, args.trials + 1):
                server.reset()
                out = tmp / f"trial-{trial}"
                points = []
                for kill in range(args.kills):
                    target = int(planned * rng.uniform(0.05, 0.95))
                    extra = ("--resume",) if kill else ()
                    process = subprocess.Popen(
                        _command(code, data, server.url, out, args.concurrency, *extra),
                        env=_env(code), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        cwd=NEUTRAL)
                    logged, killed = _kill_when(process, out / "calls.jsonl", target, rng)
                    points.append(f"{logged}" if killed else f"{logged} (ended)")
                final = subprocess.run(_command(code, data, server.url, out, args.concurrency,
                                                "--resume"), env=_env(code), check=False,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, cwd=NEUTRAL)
                if final.returncode not in (0, 1) or "Traceback" in final.stderr:
                    print(f"      resume exited {final.returncode}: {final.stderr[-3000:]}")
                stats = server.snapshot(bodies=False)
                paid, distinct = stats["completed"], stats["distinct_bodies"]
                bound = distinct + args.kills * args.concurrency
                same = (out / "judgments.jsonl").exists() and _verdicts(out) == expected
                results.append((paid, distinct, paid <= bound, same))
                rows.append([trial, ", ".join(points), paid, distinct, paid - distinct,
                             bound - distinct, "yes" if same else "NO"])
                print(f"{trial:>5} {', '.join(points):>26} {paid:>6} {distinct:>8} "
                      f"{paid - distinct:>6} {bound - distinct:>6} "
                      f"{'yes' if paid <= bound else 'NO':>3} {'yes' if same else 'NO':>5}",
                      flush=True)
                shutil.rmtree(out, ignore_errors=True)
    excess = [p - d for p, d, _, _ in results]
    print(f"\nexcess paid completions per trial: max {max(excess)}, mean "
          f"{sum(excess) / len(excess):.1f} (bound: {args.kills} x concurrency = "
          f"{args.kills * args.concurrency}); total paid {sum(p for p, *_ in results)} for "
          f"{sum(d for _, d, *_ in results)} distinct")
    failed = [i + 1 for i, r in enumerate(results) if not (r[2] and r[3])]
    if code != ROOT.resolve():
        print("figures not written to bench/results: --code runs another checkout")
        return 0
    write_results("kill_resume", [{
        "title": (f"kill -9 at a random moment, then --resume: {planned:,} planned calls, "
                  f"concurrency {args.concurrency}, cache off, faults and re-asks"),
        "columns": ["trial", "killed at (calls logged)", "paid completions", "distinct requests",
                    "excess", "bound", "verdicts as uninterrupted"],
        "rows": rows,
        "note": (f"The uninterrupted run: {reference['completed']:,} paid completions for "
                 f"{reference['distinct_bodies']:,} distinct requests "
                 f"({reference['reask_requests']} re-asks). Excess paid per trial: max "
                 f"{max(excess)}, mean {sum(excess) / len(excess):.1f}. Target: excess <= "
                 f"{args.kills} x concurrency = {args.kills * args.concurrency} and the "
                 f"verdicts of an uninterrupted run, every trial: "
                 f"{'missed in trial(s) ' + ', '.join(map(str, failed)) if failed else 'met'}."),
    }], kills=args.kills, seed=args.seed)
    print("TARGET MISSED in trial(s) " + ", ".join(map(str, failed)) if failed else
          "target met in every trial: paid <= distinct + concurrency, verdicts as the "
          "uninterrupted run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
