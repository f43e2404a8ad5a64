"""Benchmark: what the service's ledger (judge.service.ledger._ledger.DatabaseLedger) costs per
model call, on the service's SQLite database and on Postgres (pgserver, local socket), next to the
embedded SQLiteLedger of the CLI.

1. Per call, wall and CPU milliseconds of a paid call (look-up that misses, claim, record the
   raw reply of ~1.2 KB) and of a call answered from the ledger (one look-up). Postgres is
   measured with the service's engine (``pool_pre_ping`` on: one extra round-trip per
   transaction) and without the pre-ping.
2. The event loop: 16 tasks run paid calls against Postgres at once while a ticker measures how
   late the loop wakes it (the stall every other job of the worker would feel), with the ledger
   called in place and in a thread (``off_loop``, what ModelClient does for this ledger).

    python bench/service_ledger.py [--calls 1000] [--tasks 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import sqlalchemy as sa  # noqa: E402
from _common import write_results  # noqa: E402
from ledger_overhead import _reply  # noqa: E402

from judge.service import Database  # noqa: E402
from judge.service.ledger._ledger import DatabaseLedger  # noqa: E402
from judge.store import SQLiteLedger  # noqa: E402
from tests.service.serve_process import running_postgres  # noqa: E402


def per_call(ledger: Any, calls: int, tag: str) -> tuple[float, float, float]:
    """Wall ms and CPU ms per paid call, wall ms per call answered from the ledger."""
    replies = [_reply(n) for n in range(calls)]
    keys = [f"{tag}-{n:060x}" for n in range(calls)]
    wall, cpu = time.perf_counter(), time.process_time()
    for key, reply in zip(keys, replies, strict=True):
        assert ledger.get(key) is None
        assert ledger.claim(key).outcome == "mine"
        ledger.record_reply(key, reply, origin="bench")
    paid_wall = (time.perf_counter() - wall) / calls * 1000
    paid_cpu = (time.process_time() - cpu) / calls * 1000
    wall = time.perf_counter()
    for key in keys:
        assert ledger.get(key) is not None
    hit_wall = (time.perf_counter() - wall) / calls * 1000
    return paid_wall, paid_cpu, hit_wall


async def loop_stall(ledger: Any, calls: int, tasks: int, off_loop: bool) -> tuple[float, float]:
    """p99 and max lateness (ms) of a 5 ms ticker while ``tasks`` tasks run paid calls."""
    late: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            late.append((time.perf_counter() - start - 0.005) * 1000)

    async def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if off_loop:
            return await asyncio.to_thread(method, *args, **kwargs)
        return method(*args, **kwargs)

    async def worker(n: int) -> None:
        for i in range(calls // tasks):
            key = f"stall-{off_loop}-{n}-{i}"
            await call(ledger.get, key)
            await call(ledger.claim, key)
            await asyncio.sleep(0)  # the request would be on the wire here
            await call(ledger.record_reply, key, b"x" * 1200)

    tick = asyncio.create_task(ticker())
    await asyncio.gather(*(worker(n) for n in range(tasks)))
    stop.set()
    await tick
    late.sort()
    return late[int(len(late) * 0.99)], late[-1]


def _no_pre_ping(db: Database) -> Database:
    db.engine.dispose()
    db.engine = sa.create_engine(db.engine.url, pool_size=10, max_overflow=20)
    return db


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=16)
    args = parser.parse_args()
    rows: list[tuple[str, tuple[float, float, float]]] = []
    with tempfile.TemporaryDirectory(prefix="dstj-bench-") as tmp, \
            running_postgres("dstj-bench-pg-") as pg_url:
        embedded = SQLiteLedger(Path(tmp) / "ledger.sqlite3")
        rows.append(("CLI SQLiteLedger (file, WAL)", per_call(embedded, args.calls, "e")))
        embedded.close()
        service_sqlite = Database(f"sqlite:///{Path(tmp) / 'service.db'}")
        service_sqlite.migrate()
        rows.append(("service, SQLite", per_call(DatabaseLedger(service_sqlite, "p"),
                                                  args.calls, "s")))
        service_pg = Database(pg_url)
        service_pg.migrate()
        rows.append(("service, Postgres (pre-ping)", per_call(DatabaseLedger(service_pg, "p"),
                                                               args.calls, "pg")))
        bare = _no_pre_ping(Database(pg_url))
        rows.append(("service, Postgres (no pre-ping)", per_call(DatabaseLedger(bare, "p"),
                                                                  args.calls, "pgb")))
        print(f"per call, {args.calls} calls, ~{len(_reply(0))}-byte replies "
              "(paid = miss + claim + record; hit = one look-up):")
        for name, (paid_wall, paid_cpu, hit_wall) in rows:
            print(f"  {name:34s} paid {paid_wall:6.3f} ms wall ({paid_cpu:.3f} ms CPU), "
                  f"hit {hit_wall:6.3f} ms wall")
        ledger = DatabaseLedger(service_pg, "stall")
        stalls = []
        for off_loop in (False, True):
            samples = [asyncio.run(loop_stall(ledger, args.calls, args.tasks, off_loop))
                       for _ in range(3)]
            p99 = statistics.median(s[0] for s in samples)
            worst = max(s[1] for s in samples)
            where = "in a thread (off_loop)" if off_loop else "on the event loop"
            print(f"event loop, {args.tasks} tasks on Postgres, ledger {where}: ticker late "
                  f"p99 {p99:.2f} ms, max {worst:.2f} ms")
            stalls.append([where, f"{p99:.2f}", f"{worst:.2f}"])
        for db in (service_sqlite, service_pg, bare):
            db.dispose()
    write_results("service_ledger", [{
        "title": (f"The ledger per model call, {args.calls:,} calls of "
                  f"~{len(_reply(0)):,}-byte replies"),
        "columns": ["ledger", "paid call, wall (ms)", "paid call, CPU (ms)",
                    "answered from the ledger, wall (ms)"],
        "rows": [[name, f"{paid_wall:.2f}", f"{paid_cpu:.2f}", f"{hit_wall:.2f}"]
                 for name, (paid_wall, paid_cpu, hit_wall) in rows],
        "note": ("A paid call is a look-up that misses, a claim and the record of the raw "
                 "reply (three statements, two commits); Postgres runs locally (pgserver, "
                 "socket)."),
    }, {
        "title": (f"The event loop while {args.tasks} tasks run paid calls on Postgres "
                  "(a 5 ms ticker, median p99 of 3 rounds)"),
        "columns": ["ledger called", "ticker late, p99 (ms)", "ticker late, max (ms)"],
        "rows": stalls,
    }], calls=args.calls, tasks=args.tasks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
