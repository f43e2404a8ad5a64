"""What a JSON body of a million small values costs a real ``dst-judge serve`` in memory.

A body within the JSON size limit (2 MB) can hold a million values (``[0,0,...]``); parsing it
into Python objects costs far more than its bytes. The server runs on 127.0.0.1 (API only, no
rate limits); a thread samples its resident memory (psutil) every millisecond while one, then
eight such bodies at once, are posted to ``POST /v1/jobs``. Printed and written to
``bench/results/json_body_memory.json``: the peak above the idle server, per body shape.

    python bench/json_body_memory.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import local_only, write_results  # noqa: E402

MILLION = 1_000_000


def bodies() -> dict[str, bytes]:
    zeros = ",".join(["0"] * MILLION)
    return {
        "a top-level array": f"[{zeros}]".encode(),
        "an input's list": ('{"kind": "evaluate", "inputs": {"schema": [' + zeros +
                            ']}}').encode(),
        "options.dialogue_ids": ('{"kind": "evaluate", "inputs": {}, "options": '
                                 '{"dialogue_ids": [' + zeros + ']}}').encode(),
        # the largest body a route takes: 100,000 dialogue ids (not a million values)
        "100,000 dialogue ids (accepted size)": (
            '{"kind": "evaluate", "inputs": {}, "options": {"dialogue_ids": [' +
            ",".join(f'"D{i:06d}"' for i in range(100_000)) + ']}}').encode(),
    }


class Sampler:
    """The process's resident memory, sampled in a thread; ``peak`` since the last reset."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process = psutil.Process(pid)
        self.peak = 0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.001)

    def now(self) -> int:
        return int(self.process.memory_info().rss)

    def reset(self) -> None:
        self.peak = self.now()

    def stop(self) -> None:
        self.running = False
        self.thread.join(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measurements per figure (max)")
    args = parser.parse_args(argv)
    local_only()
    import httpx

    from tests.service.serve_process import ServeProcess, create_token

    rows = []
    with tempfile.TemporaryDirectory(prefix="dstj-jsonmem-") as folder:
        data = Path(folder)
        token = create_token(data, "lab", "read,submit")
        flags = ["--jobs", "0", "--requests-per-minute", "0", "--auth-failures-per-minute", "0"]
        with ServeProcess(data, args=flags, max_seconds=1200) as server, \
                httpx.Client(base_url=server.url, trust_env=False, timeout=120,
                             headers={"Authorization": f"Bearer {token}",
                                      "Content-Type": "application/json"}) as client:
            sampler = Sampler(server.process.pid)
            try:
                post = lambda body: client.post("/v1/jobs", content=body)  # noqa: E731
                for name, body in bodies().items():
                    statuses: set[int] = set()
                    figures = {}
                    for parallel in (1, 8):
                        peaks = []
                        for _ in range(args.repeat):
                            time.sleep(0.3)
                            idle = sampler.now()
                            sampler.reset()
                            with ThreadPoolExecutor(parallel) as pool:
                                answers = list(pool.map(post, [body] * parallel))
                            time.sleep(0.05)
                            statuses.update(a.status_code for a in answers)
                            peaks.append((sampler.peak - idle) / 2**20)
                        figures[parallel] = max(peaks)
                    rows.append([name, f"{len(body) / 1e6:.1f} MB",
                                 ", ".join(map(str, sorted(statuses))),
                                 f"{figures[1]:.0f}", f"{figures[8]:.0f}"])
                    print(f"{name}: {len(body)} bytes, answered {sorted(statuses)}; peak above "
                          f"idle {figures[1]:.1f} MB (1 body), {figures[8]:.1f} MB (8 at once)",
                          flush=True)
            finally:
                sampler.stop()
    write_results("json_body_memory", [{
        "title": "Memory a JSON body costs the server (peak above idle): a million zeros "
                 "three ways, and the largest body a route takes",
        "columns": ["body", "size", "answer", "1 body, MB",
                    "8 at once, MB"],
        "rows": rows,
        "note": f"max of {args.repeat} measurements each; RSS sampled every millisecond"}],
        repeat=args.repeat)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
