"""Benchmark: two ``dst-judge serve`` replicas on one Postgres (pgserver) share one rate-limit
pool. The endpoint allows R requests per minute; a recording proxy in front of the fake model
(tests/fault_server.py) notes when every request arrives. Prints the most requests the model
saw in any 60-second window (target: never more than R), the jobs each replica ran, and how
long the queue took against the R-per-minute ideal.

    python bench/service_ratelimit.py [--rpm 120] [--jobs 12] [--slots 4]
"""

from __future__ import annotations

import argparse
import bisect
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import local_only, write_results  # noqa: E402

import judge  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess  # noqa: E402
from tests.service.serve_process import (  # noqa: E402
    ServeProcess,
    create_token,
    job_dialogues,
    running_postgres,
)

EXAMPLES = ROOT / "examples"


class RecordingProxy(ThreadingHTTPServer):
    """Forwards POSTs to the fake model and notes the arrival time of each."""

    daemon_threads = True

    def __init__(self, target: str) -> None:
        self.target = target
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Forward(BaseHTTPRequestHandler):
    server: RecordingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:
        with self.server.lock:
            self.server.arrivals.append(time.time())
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = urllib.request.Request(self.server.target + self.path.removeprefix("/v1"),
                                         data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=60) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def max_in_window(times: list[float], width: float) -> int:
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + width) - i for i, t in enumerate(ordered)),
               default=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=120, help="shared requests per minute")
    parser.add_argument("--jobs", type=int, default=12, help="jobs of 22 calls each")
    parser.add_argument("--slots", type=int, default=4, help="jobs per replica at once")
    args = parser.parse_args()
    local_only()
    folder = Path(tempfile.mkdtemp(prefix="dstj-rate-"))
    try:
        with running_postgres("dstj-rate-pg-") as url:
            dialogues = job_dialogues(folder, args.jobs)
            token = create_token(folder / "a", "bench", db=url)
            with ServerProcess(FaultConfig(latency=0.05), max_seconds=3600) as model:
                proxy = RecordingProxy(model.url.removesuffix("/v1") + "/v1")
                threading.Thread(target=proxy.serve_forever, daemon=True).start()
                endpoints = {"fake": {"base_url": proxy.url, "rpm": args.rpm}}
                flags = ["--jobs", str(args.slots)]
                a = ServeProcess(folder / "a", endpoints=endpoints, db=url, args=flags,
                                 max_seconds=3600)
                b = ServeProcess(folder / "b", endpoints=endpoints, db=url, args=flags,
                                 max_seconds=3600)
                with a, b:
                    client = judge.Client(a.url, token)
                    common = {
                        "schema": client.upload(EXAMPLES / "schema.json", "schema").id,
                        "predictions": client.upload(EXAMPLES / "predictions.jsonl",
                                                     "predictions").id}
                    started = time.time()
                    ids = [client.submit("evaluate", {**common, "dialogues": client.upload(
                        p, "dialogues").id}, {"model": "m", "concurrency": 8}).id
                        for p in dialogues]
                    finished = [client.wait(i, timeout=3600, poll=2.0) for i in ids]
                    elapsed = time.time() - started
                    replicas = {(a.health().worker or {})["id"]: "A",
                                (b.health().worker or {})["id"]: "B"}
                proxy.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    arrivals = proxy.arrivals
    ok = sum(1 for j in finished if j.status == "succeeded")
    by_replica = Counter(replicas.get(j.progress.worker, "?") for j in finished)
    worst = max_in_window(arrivals, 60.0)
    floor = (len(arrivals) - 1) // args.rpm * 60.0  # the last request's earliest minute
    print(f"two replicas on Postgres, shared limit {args.rpm} requests/min, {args.jobs} jobs "
          f"of 22 calls, {args.slots} jobs per replica at once")
    print(f"succeeded: {ok}/{len(finished)}; jobs finished by replica: "
          f"{dict(sorted(by_replica.items()))}")
    print(f"requests seen by the model: {len(arrivals)} in {elapsed:.1f} s")
    print(f"most requests in any 60 s window: {worst} (limit {args.rpm}): "
          f"{'held' if worst <= args.rpm else 'EXCEEDED'}")
    print(f"most in any 1 s window: {max_in_window(arrivals, 1.0)}; queue time {elapsed:.0f} s; "
          f"the limit allows no less than {floor:.0f} s for {len(arrivals)} requests")
    write_results("service_ratelimit", [{
        "title": (f"Two replicas on one Postgres sharing {args.rpm} requests/minute: "
                  f"{args.jobs} jobs of 22 calls, {args.slots} jobs per replica at once"),
        "columns": ["figure", "value"],
        "rows": [["jobs succeeded", f"{ok}/{len(finished)}"],
                 ["jobs finished by replica", ", ".join(f"{name}: {count}" for name, count
                                                        in sorted(by_replica.items()))],
                 ["requests the model saw", f"{len(arrivals)} in {elapsed:.0f} s"],
                 ["most requests in any 60 s window", f"{worst} (limit {args.rpm}: "
                  f"{'held' if worst <= args.rpm else 'EXCEEDED'})"],
                 ["most requests in any 1 s window", max_in_window(arrivals, 1.0)],
                 ["least time the limit allows for these requests", f"{floor:.0f} s"]],
    }], rpm=args.rpm, jobs=args.jobs)
    return 0 if ok == len(finished) and worst <= args.rpm else 1


if __name__ == "__main__":
    sys.exit(main())
