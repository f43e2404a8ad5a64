"""Benchmark: what checking untrusted replies costs, what hostile replies cost in memory, and
what hostile requests cost a real ``dst-judge serve``.

1. CPU per reply of :func:`judge.model.parse_chat_reply` (pydantic validation, depth scan,
   redaction) against the unchecked parse it replaced (``json.loads`` and dict lookups), on
   a typical judge reply.
2. Peak RSS of one call answered with a 50 MB reply, a gzip bomb (200 MB of zeros in about
   200 KB) and, for comparison, a normal reply; each in a fresh interpreter (``ru_maxrss`` is a
   lifetime peak), over both transports, against tests/fault_server.py in a subprocess (its
   memory is not ours). Before the caps, the bomb took 2.1 GB of RSS.
3. A real ``dst-judge serve`` (default caps, API only) under hostile uploads of at most 1 MB
   compressed, each answered on a fresh connection: the API process's peak RSS growth
   (sampled every 5 ms, psutil), the seconds to the answer, the bytes the process wrote
   (``write_chars``: files and sockets) and, for a 150 MB body announced without a token,
   the seconds from its headers to the 401 and the bytes the server received (its own count,
   ``dst_judge_http_received_bytes_total``). Targets: RSS <= 64 MB and <= 2 s per upload; the
   3 MB bomb refused within 2 s having written <= 64 MB; the 401 within 0.5 s, <= 1 MB read.

    python bench/hostile.py [--replies 20000] [--skip-rss] [--skip-service]
                            [--json hostile.json]
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
import judge.errors
from judge.model import ModelClient
config = judge.load_config({{"model": "m", "base_url": {url!r}, "use_cache": False,
                             "max_retries": 0, "http_backend": {backend!r}}})
client = ModelClient(config)
async def run():
    try:
        await client.complete({{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]}},
                              template_hash="t")
        outcome = "judged"
    except judge.errors.ModelError as exc:
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


def _service_uploads() -> list[tuple[str, str, str, str, bytes]]:
    """(case, route, kind, file name, body): real files and hostile ones, each <= 3 MB."""
    from tests.service import hostile

    data = Path("/work/shared/data")
    dialogue = (ROOT / "examples" / "dialogues.jsonl").read_bytes().splitlines()[0]
    cases = [("3 MB gzip bomb", "/v1/files", "dialogues", "d.jsonl.gz", hostile.gzip_bomb(3)),
             ("one 400 MB line (gz)", "/v1/files", "dialogues", "d.jsonl.gz",
              hostile.one_line_gz(400)),
             ("a good dialogue x 200 MB (gz)", "/v1/files", "dialogues", "d.jsonl.gz",
              hostile.repeated_lines_gz(dialogue, 200)),
             ("bundle: summary.json of 400 MB", "/v1/bundles", "", "b.tar.gz",
              hostile.huge_member_bundle("summary.json", 400)),
             ("bundle: judgments of 400 MB", "/v1/bundles", "", "b.tar.gz",
              hostile.huge_member_bundle("judgments.jsonl", 400))]
    for name, kind in (("multiwoz/dialogues.jsonl.gz", "dialogues"),
                       ("multiwoz/predictions/original.jsonl.gz", "predictions")):
        if (data / name).is_file():  # real data, valid: accepted
            cases.append((f"MultiWOZ {kind} (real)", "/v1/files", kind, Path(name).name,
                          (data / name).read_bytes()))
    return cases


def service(report: dict) -> None:
    import tempfile

    import httpx

    from judge.service import Database, create_token
    from tests.service import hostile
    from tests.service.serve_process import ServeProcess

    with tempfile.TemporaryDirectory(prefix="dstj-hostile-") as folder:
        data_dir = Path(folder)
        db = Database(f"sqlite:///{data_dir / 'dst-judge.db'}")
        db.migrate()
        token = create_token(db, "lab", "read,submit", name="bench")[0]
        db.dispose()
        auth = {"Authorization": f"Bearer {token}"}
        with ServeProcess(data_dir, args=["--jobs", "0"], max_seconds=900) as server:
            pid = server.process.pid
            with httpx.Client(base_url=server.url, timeout=120, trust_env=False) as client:
                client.post("/v1/files", headers=auth, data={"kind": "schema"}, files={
                    "file": ("s.json", (ROOT / "examples" / "schema.json").read_bytes())})
            rows = []
            for case, route, kind, name, body in _service_uploads():
                written = hostile.written_bytes(pid)
                with httpx.Client(base_url=server.url, timeout=120, trust_env=False) as client, \
                        hostile.PeakRss(pid) as rss:
                    start = time.perf_counter()
                    answer = client.post(route, headers=auth, files={"file": (name, body)},
                                         data={"kind": kind} if kind else None)
                    seconds = time.perf_counter() - start
                row = {"case": case, "packed_kb": round(len(body) / 1024),
                       "status": answer.status_code, "seconds": round(seconds, 3),
                       "rss_growth_mb": round(rss.growth_mb, 1),
                       "written_mb": round((hostile.written_bytes(pid) - written) / 2 ** 20, 2)}
                rows.append(row)
                print(f"  {case:<34} {row['packed_kb']:>6} KB  {row['status']}  "
                      f"{row['seconds']:6.3f} s  RSS +{row['rss_growth_mb']:5.1f} MB  "
                      f"wrote {row['written_mb']:6.2f} MB")
            before = hostile.received_bytes(server.url, server.admin_token())
            status, first, sent = hostile.announced_upload(
                server.port, "POST", "/v1/files", length=150 << 20,
                headers={"Content-Type": "multipart/form-data; boundary=b"}, send_for=5.0)
            time.sleep(0.2)
            received = hostile.received_bytes(server.url, server.admin_token()) - before
            unauthenticated = {"status": status, "answer_seconds": round(first or -1, 3),
                               "client_sent_mb": round(sent / 2 ** 20, 2),
                               "server_received_kb": round(received / 1024, 1)}
            print(f"  150 MB announced, no token: {status} after {first or -1:.3f} s; the "
                  f"client got {sent / 2 ** 20:.1f} MB out, the server received "
                  f"{received / 1024:.0f} KB")
    report["service"] = {"uploads": rows, "unauthenticated_150mb": unauthenticated}


def service_tables(figures: dict) -> list[dict]:
    """The service part's figures as the docs' tables."""
    uploads = [[row["case"], row["packed_kb"], row["status"], row["seconds"],
                row["rss_growth_mb"], row["written_mb"]] for row in figures["uploads"]]
    blind = figures["unauthenticated_150mb"]
    return [{"title": "Hostile uploads to a real dst-judge serve (default caps)",
             "columns": ["case", "sent (KB)", "status", "answered in (s)",
                         "API process RSS growth (MB)", "written to disk (MB)"],
             "rows": uploads,
             "note": "Targets: an upload of at most 1 MB compressed raises the API process's "
                     "RSS by at most 64 MB and is answered within 2 s; a 3 MB gzip bomb is "
                     "refused within 2 s having written at most 64 MB."},
            {"title": "150 MB upload announced without a token",
             "columns": ["status", "answered after (s)", "client sent (MB)",
                         "server received (KB)"],
             "rows": [[blind["status"], blind["answer_seconds"], blind["client_sent_mb"],
                       blind["server_received_kb"]]],
             "note": "Target: 401 within 0.5 s of the headers, the server having read at most "
                     "1 MB of the body."}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=20_000, help="replies parsed per timing")
    parser.add_argument("--skip-rss", action="store_true", help="only the parse cost")
    parser.add_argument("--skip-replies", action="store_true", help="skip parts 1 and 2")
    parser.add_argument("--skip-service", action="store_true", help="skip part 3")
    args = parser.parse_args(argv)
    local_only()
    tables: list[dict] = []
    if not args.skip_replies:
        print("reply checking:")
        tables.append({"title": "CPU per typical judge reply "
                       f"({len(typical_reply()):,} bytes, {args.replies:,} replies)",
                       "columns": ["parse", "µs CPU per reply"],
                       "rows": parse_cost(args.replies),
                       "note": "parse_chat_reply checks every field, the depth and removes "
                               "the key; the unchecked parse is the one it replaced, for "
                               "comparison."})
        if not args.skip_rss:
            print("one call, peak RSS of a fresh interpreter (cap: max_reply_bytes = 1 MB):")
            tables.append({"title": "One call in a fresh interpreter: peak RSS (cap: "
                                    "max_reply_bytes = 1 MB)",
                           "columns": ["transport", "reply", "peak RSS (MB)", "outcome"],
                           "rows": rss(["normal", "size-50mb", "gzip-bomb"]),
                           "note": "Most of a fresh interpreter's memory is its imports; the "
                                   "hostile replies should cost no more than a normal one."})
    if not args.skip_service:
        print("dst-judge serve (default caps), one upload per connection:")
        report: dict = {}
        service(report)
        tables.extend(service_tables(report["service"]))
    write_results("hostile", tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
