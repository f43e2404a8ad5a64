"""Helpers the benchmark scripts share: memory readings, a proxy-free loopback, and running one
dst-judge command with its own peak memory measured."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (``ru_maxrss``), in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def current_rss_mb() -> float:
    """Resident memory of this process now, in MB (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def local_only() -> None:
    """No proxy may sit between the judge and the benchmark server on 127.0.0.1."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        os.environ.pop(name, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"


RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def write_results(name: str, tables: list[dict], **facts: object) -> str:
    """Write a benchmark's figures to ``bench/results/NAME.json`` beside printing them.

    The documentation renders its benchmark tables from these files (``docs/_hooks.py``), so a
    table in the docs is always what the script last measured, never a figure copied by hand.
    Each table is ``{"title", "columns", "rows", "note"?}``; ``facts`` are recorded with them
    (the command, the machine, the date are added here)."""
    import datetime
    import json
    import platform

    os.makedirs(RESULTS, exist_ok=True)
    record = {
        "benchmark": name,
        "command": "python " + " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": (f"{os.cpu_count()} cores, {platform.machine()}, "
                    f"Python {platform.python_version()}"),
        "load_average": round(os.getloadavg()[0], 1),
        **facts,
        "tables": tables,
    }
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    print(f"figures written to {os.path.relpath(path)}")
    return path


SHARED_MULTIWOZ = Path(__file__).resolve().parents[2] / "shared" / "data" / "multiwoz"
"""The shared MultiWOZ data beside the project (what the scale benchmarks replicate)."""

MEASURE_CLI = """
import resource, sys, time
from judge.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
peak = usage.ru_maxrss / 1024
print(f"@@ {code} {seconds:.2f} {peak:.1f} {usage.ru_utime + usage.ru_stime:.2f}",
      file=sys.stderr)
"""
"""``python -c MEASURE_CLI ARGS...`` runs one dst-judge command and ends its stderr with
``@@ exit seconds peak-MB cpu-seconds`` (its own peak RSS, nothing of the parent's)."""
