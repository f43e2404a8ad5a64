"""Benchmark: what checking untrusted replies costs, and what hostile replies cost in memory.

1. CPU per reply of :func:`judge.model.parse_chat_reply` (pydantic validation, depth scan,
   redaction) against the unchecked parse it replaced (``json.loads`` and dict lookups), on
   a typical judge reply.
2. Peak RSS of one call answered with a 50 MB reply, a gzip bomb (200 MB of zeros in about
   200 KB) and, for comparison, a normal reply; each in a fresh interpreter (``ru_maxrss`` is a
   lifetime peak), over both transports, against tests/fault_server.py in a subprocess (its
   memory is not ours). Before the caps, the bomb took 2.1 GB of RSS.

    python bench/hostile.py [--replies 20000] [--skip-rss]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import local_only, write_results  # noqa: E402

KEY = "sk-bench-0000000000000000000000000000"

CHILD = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from bench._common import local_only, peak_rss_mb
local_only()
import judge
from judge.model import ModelClient
config = judge.load_config({{"model": "m", "base_url": {url!r}, "use_cache": False,
                             "max_retries": 0, "http_backend": {backend!r}}})
client = ModelClient(config)
async def run():
    try:
        await client.complete({{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}},
                              template_hash="t")
        outcome = "judged"
    except judge.ModelError as exc:
        outcome = str(exc)[:70]
    finally:
        await client.aclose()
    return outcome
outcome = asyncio.run(run())
print(json.dumps({{"rss_mb": peak_rss_mb(), "outcome": outcome}}))
"""


def typical_reply() -> bytes:
    content = json.dumps({"explanation": "The state matches the dialogue except the area." * 3,
                          "incorrect_domain_slot": {"hotel-area": "north"}})
    return json.dumps({
        "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "system_fingerprint": "fp_1234",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": None}}],
        "usage": {"prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853,
                  "prompt_tokens_details": {"cached_tokens": 512}}}).encode()


def unchecked(raw: bytes) -> tuple:
    """The parse before replies were checked (for comparison only)."""
    body = json.loads(raw)
    choice = body["choices"][0]
    usage = body.get("usage") or {}
    return (choice["message"].get("content"), choice.get("finish_reason"),
            int(usage.get("prompt_tokens") or 0), body.get("model"), body.get("id"))


def parse_cost(replies: int) -> list[list[str]]:
    from judge.model import ReplyLimits, parse_chat_reply

    raw = typical_reply()
    limits = ReplyLimits()
    rows = []
    for name, parse in (("unchecked json.loads", unchecked),
                        ("parse_chat_reply", lambda r: parse_chat_reply(r, limits=limits,
                                                                        secret=KEY))):
        parse(raw)
        start = time.process_time()
        for _ in range(replies):
            parse(raw)
        per = (time.process_time() - start) / replies * 1e6
        print(f"  {name:<22} {per:7.1f} µs CPU per reply ({len(raw)} bytes)")
        rows.append([name, f"{per:.1f}"])
    return rows


def rss(replies: list[str]) -> list[list[str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from fault_server import FaultConfig, ServerProcess

    rows = []
    with ServerProcess(FaultConfig()) as server:
        base = server.url.removesuffix("/v1")
        for backend in ("aiohttp", "httpx"):
            for kind in replies:
                url = f"{base}/v1" if kind == "normal" else f"{base}/hostile/{kind}/v1"
                code = CHILD.format(root=str(ROOT), url=url, backend=backend)
                done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, timeout=300, check=False)
                if done.returncode != 0:
                    print(f"  {backend:<8} {kind:<10} failed: {done.stderr.strip()[-200:]}")
                    rows.append([backend, kind, "—", "the child failed"])
                    continue
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"  {backend:<8} {kind:<10} peak RSS {figures['rss_mb']:6.1f} MB  "
                      f"({figures['outcome']})")
                rows.append([backend, kind, f"{figures['rss_mb']:.0f}",
                             figures["outcome"].rstrip("; ")])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=20_000, help="replies parsed per timing")
    parser.add_argument("--skip-rss", action="store_true", help="only the parse cost")
    args = parser.parse_args(argv)
    local_only()
    print("reply checking:")
    tables = [{"title": "CPU per typical judge reply "
               f"({len(typical_reply()):,} bytes, {args.replies:,} replies)",
               "columns": ["parse", "µs CPU per reply"], "rows": parse_cost(args.replies),
               "note": "parse_chat_reply checks every field, the depth and removes the key; "
                       "the unchecked parse is the one it replaced, for comparison."}]
    if not args.skip_rss:
        print("one call, peak RSS of a fresh interpreter (cap: max_reply_bytes = 1 MB):")
        tables.append({"title": "One call in a fresh interpreter: peak RSS (cap: "
                                "max_reply_bytes = 1 MB)",
                       "columns": ["transport", "reply", "peak RSS (MB)", "outcome"],
                       "rows": rss(["normal", "size-50mb", "gzip-bomb"]),
                       "note": "Most of a fresh interpreter's memory is its imports; the "
                               "hostile replies should cost no more than a normal one."})
        write_results("hostile", tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
