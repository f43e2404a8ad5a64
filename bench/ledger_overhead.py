"""Benchmark: CPU the ledger of paid calls adds per model call. Target: < 0.5 ms per call.

Two measurements:

1. The ledger alone (SQLite, WAL, a file in a temporary directory): the operations of one
   paid call (look-up that misses, claim, record the raw reply: three statements, two
   commits) and of one call answered from the ledger (one look-up), with chat.completion
   replies of realistic size (~1.2 KB), on a ledger already holding ``--prefill`` replies.
2. In situ: ``judge.evaluate`` on tagged copies of the examples against tests/fault_server.py
   (a subprocess, no faults), once with the real ledger and once with a ledger that records
   nothing; the difference in client CPU per call is what the ledger costs inside a run.

    python bench/ledger_overhead.py [--calls 5000] [--prefill 20000] [--copies 40]
                                    [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, write_results  # noqa: E402

import judge  # noqa: E402
from judge.store import Claim, SQLiteLedger  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess, replicate_examples  # noqa: E402

TARGET_MS = 0.5


def _reply(n: int) -> bytes:
    reason = "The predicted values match what the user asked for in this turn. " * 12
    text = json.dumps({"explanation": reason, "incorrect_domain_slot": {}})
    return json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion", "model": "bench",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {
                           "role": "assistant", "content": text, "refusal": None}}],
                       "usage": {"prompt_tokens": 1800, "completion_tokens": 90,
                                 "prompt_tokens_details": {"cached_tokens": 1500}}}).encode()


def alone(calls: int, prefill: int) -> tuple[float, float, float]:
    """CPU ms per paid call and per ledger hit, and the file size per reply (bytes)."""
    with tempfile.TemporaryDirectory(prefix="dst-judge-ledger-") as tmp:
        ledger = SQLiteLedger(Path(tmp) / "ledger.sqlite3")
        ledger.import_replies(((f"old-{n:064d}", _reply(n)) for n in range(prefill)),
                              origin="prefill")
        replies = [_reply(n) for n in range(calls)]
        keys = [f"{n:064x}" for n in range(calls)]
        start = time.process_time()
        for key, reply in zip(keys, replies, strict=True):
            assert ledger.get(key) is None
            assert ledger.claim(key).outcome == "mine"
            ledger.record_reply(key, reply, origin="bench")
        paid = (time.process_time() - start) / calls * 1000
        start = time.process_time()
        for key in keys:
            assert ledger.get(key) is not None
        hit = (time.process_time() - start) / calls * 1000
        size = ledger.stats()["file_bytes"] / (calls + prefill)
        ledger.close()
    return paid, hit, size


class NoLedger:
    """A ledger that records nothing (the in-situ baseline)."""

    owner = "none"
    lease = 60.0

    def get(self, key: str) -> None:
        return None

    def claim(self, key: str, *, refresh: bool = False) -> Claim:
        return Claim("mine", owner=self.owner)

    def record_reply(self, key: str, content: bytes, **kwargs: Any) -> None:
        pass

    def record_failure(self, key: str, error: str) -> None:
        pass

    def release(self, key: str) -> None:
        pass

    def renew(self) -> int:
        return 0

    def close(self) -> None:
        pass


def in_situ(copies: int, repeats: int) -> tuple[float, float, int]:
    """Median client CPU ms per call with the SQLite ledger and with none; calls per run."""
    local_only()
    with tempfile.TemporaryDirectory(prefix="dst-judge-ledger-") as tmp, \
            ServerProcess(FaultConfig(latency=0.002)) as server:
        schema, dialogues, predictions = replicate_examples(ROOT / "examples",
                                                            Path(tmp) / "data", copies)
        data = (judge.load_schema(schema), judge.load_dialogues(dialogues))
        data = (*data, judge.load_predictions(predictions, data[1], data[0]))
        figures: dict[str, list[float]] = {"sqlite": [], "none": []}
        calls = 0
        for n in range(repeats):
            for kind in ("none", "sqlite"):
                config = judge.load_config({
                    "model": "bench", "base_url": server.url, "concurrency": 16,
                    "use_cache": True, "cache_dir": str(Path(tmp) / f"cache-{kind}-{n}"),
                    "http_backend": "aiohttp"})
                ledger = NoLedger() if kind == "none" else None
                start = time.process_time()
                result = judge.evaluate(config, *data, ledger=ledger)
                cpu = time.process_time() - start
                calls = result.summary["calls"]["sent"]
                figures[kind].append(cpu / calls * 1000)
    return statistics.median(figures["sqlite"]), statistics.median(figures["none"]), calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--prefill", type=int, default=20000)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    paid, hit, size = alone(args.calls, args.prefill)
    print(f"ledger alone (SQLite WAL, {args.prefill} replies already in it, "
          f"{len(_reply(0))}-byte replies): {paid:.3f} ms CPU per paid call (miss + claim + "
          f"record), {hit:.3f} ms per call answered from the ledger; {size:.0f} bytes on "
          "disk per reply", flush=True)
    with_ledger, without, calls = in_situ(args.copies, args.repeats)
    print(f"in a run ({calls} calls, concurrency 16, median of {args.repeats}): client CPU "
          f"{with_ledger:.3f} ms per call with the ledger, {without:.3f} ms without; the "
          f"ledger's share {with_ledger - without:+.3f} ms")
    worst = max(paid, with_ledger - without)
    print(f"target < {TARGET_MS} ms per call: " + ("met" if worst < TARGET_MS else
                                                  f"MISSED ({worst:.3f} ms)"))
    write_results("ledger_overhead", [{
        "title": "What the ledger of paid calls costs per call (SQLite, WAL)",
        "columns": ["measurement", "per call (ms CPU)"],
        "rows": [[f"ledger alone: paid call (look-up, claim, record), {args.prefill:,} replies "
                  "already in it", f"{paid:.3f}"],
                 ["ledger alone: call answered from the ledger (one look-up)", f"{hit:.3f}"],
                 [f"in a run of {calls:,} calls at concurrency 16 (median of {args.repeats}): "
                  "client CPU with the ledger", f"{with_ledger:.3f}"],
                 ["the same run with a ledger that records nothing", f"{without:.3f}"],
                 ["the ledger's share inside a run", f"{with_ledger - without:+.3f}"]],
        "note": (f"Replies of {len(_reply(0)):,} bytes take {size:,.0f} bytes on disk each. "
                 f"Target: < {TARGET_MS} ms per call: "
                 f"{'met' if worst < TARGET_MS else 'MISSED'}."),
    }])
    return 0


if __name__ == "__main__":
    sys.exit(main())
