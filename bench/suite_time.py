"""Time the README's test command: wall time and pass/fail counts, optionally on a machine kept
busy by CPU-bound processes, optionally several runs in a row.

The command is read from the README (the line after the setup command, as .ci/run runs it) and
run with bash in the checkout. ``--tests-only`` drops its ``pip install`` step (the environment
is installed already); ``--fresh-clone`` runs in a ``git clone`` of this checkout's HEAD in a
temporary folder, with that clone first on PYTHONPATH (tests only: an editable install is never
re-pointed at a temporary folder). ``--hogs N`` starts N processes spinning ``while True: pass``
for the whole measurement (at most 8, each ended at the end and by a deadline of its own).
Arguments after ``--`` go to pytest (``-- -n 2``: later options override the configured ones).

    python bench/suite_time.py [--runs 3] [--hogs 2] [--fresh-clone] [--tests-only]
                               [--max-seconds 3600] [--log-dir DIR] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_HOGS = 8
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def readme_test_command() -> str:
    """The README's test command: the second line of its first bash block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("```bash\n", 1)[1].splitlines()[1].strip()


def summary_counts(output: str) -> dict[str, int]:
    """Counts from pytest's last summary line (``12 passed, 1 failed in 3.2s``)."""
    lines = [line for line in output.splitlines() if " in " in line and _COUNT.search(line)]
    if not lines:
        return {}
    counts = {kind: int(n) for n, kind in _COUNT.findall(lines[-1])}
    if "error" in counts:
        counts["errors"] = counts.pop("error") + counts.get("errors", 0)
    return counts


@contextlib.contextmanager
def hogs(count: int, seconds: float) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` CPU-bound processes, each stopping by itself after ``seconds``; all are
    killed (by their own ids) when the block ends."""
    if not 0 <= count <= MAX_HOGS:
        raise SystemExit(f"--hogs must be between 0 and {MAX_HOGS}")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            started.append(subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)],
                                            stdin=subprocess.DEVNULL))
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


def fresh_clone(target: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def run_once(command: str, cwd: Path, env: dict[str, str], log: Path,
             max_seconds: float) -> tuple[float, int, dict[str, int]]:
    """Run the command in its own process group; returns wall seconds, exit code, counts."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=max_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = -9
    wall = time.monotonic() - started
    return wall, code, summary_counts(log.read_text(encoding="utf-8", errors="replace"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs in a row (default 1)")
    parser.add_argument("--hogs", type=int, default=0,
                        help=f"CPU-bound processes kept running meanwhile (0-{MAX_HOGS})")
    parser.add_argument("--fresh-clone", action="store_true",
                        help="run in a git clone of HEAD in a temporary folder (tests only)")
    parser.add_argument("--tests-only", action="store_true",
                        help="drop the command's pip install step")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="bound of each run, and of the hogs per run (default 3600)")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="where each run's output goes (default: a temporary folder)")
    args = parser.parse_args(argv)

    command = readme_test_command()
    if args.tests_only or args.fresh_clone:
        command = command.split(" && ")[-1]
    if extra:
        command += " " + " ".join(shlex.quote(a) for a in extra)
    logs = args.log_dir or Path(tempfile.mkdtemp(prefix="suite-time-"))
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    scratch: Path | None = None
    cwd = ROOT
    if args.fresh_clone:
        scratch = Path(tempfile.mkdtemp(prefix="suite-clone-"))
        cwd = fresh_clone(scratch / "dst-judge")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cwd), env.get("PYTHONPATH")) if p)
    print(f"command: {command}\nin: {cwd}\nhogs: {args.hogs}  cores: {os.cpu_count()}  "
          f"logs: {logs}", flush=True)
    results = []
    try:
        with hogs(args.hogs, args.max_seconds * args.runs + 60):
            for run in range(1, args.runs + 1):
                load = os.getloadavg()[0]
                wall, code, counts = run_once(command, cwd, env, logs / f"run-{run}.log",
                                              args.max_seconds)
                results.append(code)
                shown = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no summary line"
                print(f"run {run}: {wall:7.1f} s wall  exit {code}  {shown}  "
                      f"(load average at the start {load:.1f})", flush=True)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(code == 0 for code in results) else 1


if __name__ == "__main__":
    sys.exit(main())
