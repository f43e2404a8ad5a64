"""Benchmark: what small hostile uploads cost a real ``dst-judge serve`` in memory (issue 40,
items 1 and 2): the API process's and a worker process's RSS growth (sampled every 10 ms with
psutil, over the whole process tree) for

1. ``gzip(gzip(300 MB of zeros))`` (about 660 bytes) uploaded as a dialogues file;
2. a labels file of one 150 MB record, gzipped twice (about 520 bytes), and, when the server
   takes it, an agreement job on it (the worker loads the labels);
3. a labels file whose reviewer name is 15 MB (sent plain), then three ``GET /v1/files``
   (the listing repeats every file's ``info``).

Each case on a server of its own (``--jobs 1``: the worker in a process of its own) on
127.0.0.1 with a fresh data directory; a server stops by itself (``--max-seconds``), and every
wait is bounded. Run it on the code
before a fix and after it (``--before before.json`` puts the earlier figures beside)::

    python bench/nested_upload_memory.py [--json out.json] [--before before.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import local_only, write_results  # noqa: E402

JOB_WAIT_SECONDS = 180.0
LABEL = {"dialogue_id": "SYN00001.json", "turn_index": 0, "label": 1}


def _gzip_chunks(chunks: Iterator[bytes]) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [packer.compress(chunk) for chunk in chunks]
    out.append(packer.flush())
    return b"".join(out)


def _megabytes(byte: bytes, count: int) -> Iterator[bytes]:
    block = byte * (1 << 20)
    return (block for _ in range(count))


def nested_zeros() -> bytes:
    return gzip.compress(_gzip_chunks(_megabytes(b"\0", 300)), 9)


def nested_record() -> bytes:
    head = json.dumps({**LABEL, "note": ""})[:-2].encode()
    return gzip.compress(_gzip_chunks(iter([head, *_megabytes(b"a", 150), b'"}\n'])), 9)


def long_name() -> bytes:
    return (json.dumps({**LABEL, "reviewer": "r" * (15 << 20)}) + "\n").encode()


class TreeRss:
    """Peak RSS growth of a process and of each of its descendants (found while sampling;
    a child's growth counts from when it was first seen)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.first: dict[int, int] = {}
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._sample()

    def _sample(self) -> None:
        import psutil

        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        for process in processes:
            try:
                rss = process.memory_info().rss
            except psutil.Error:
                continue
            self.first.setdefault(process.pid, rss)
            self.peak[process.pid] = max(self.peak.get(process.pid, 0), rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.01)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()

    def growth_mb(self, pid: int) -> float:
        return (self.peak.get(pid, 0) - self.first.get(pid, 0)) / 2 ** 20

    @property
    def api_mb(self) -> float:
        return self.growth_mb(self.root.pid)

    @property
    def worker_mb(self) -> float:
        """The largest growth of any process below the API (the worker processes)."""
        return max((self.growth_mb(pid) for pid in self.peak if pid != self.root.pid),
                   default=0.0)


def _wait_job(client: Any, auth: dict[str, str], job_id: str) -> dict[str, Any]:
    end = time.monotonic() + JOB_WAIT_SECONDS
    job: dict[str, Any] = {}
    while time.monotonic() < end:
        job = client.get(f"/v1/jobs/{job_id}", headers=auth).json()
        if job.get("status") in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.5)
    client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    return {**job, "status": f"{job.get('status')} (gave up after {JOB_WAIT_SECONDS:g} s)"}


def measure() -> list[dict[str, Any]]:
    cases = [("gzip(gzip(300 MB of zeros)) as dialogues", "dialogues", "d.jsonl.gz",
              nested_zeros()),
             ("labels: one 150 MB record, gzipped twice", "labels", "l.jsonl.gz",
              nested_record()),
             ("labels: a 15 MB reviewer name (plain)", "labels", "l.jsonl", long_name())]
    rows = []
    for case, kind, name, body in cases:
        row = one_case(case, kind, name, body)
        rows.append(row)
        print(f"  {case:<44} {row['sent_bytes']:>10,} B  {row['status']}  "
              f"{row['seconds']:6.2f} s  API +{row['api_rss_growth_mb']:7.1f} MB  "
              f"worker +{row['worker_rss_growth_mb']:7.1f} MB  {row['after']}", flush=True)
    return rows


def one_case(case: str, kind: str, name: str, body: bytes) -> dict[str, Any]:
    """One upload (and what follows it) on a server of its own: memory a process freed stays
    in its RSS, so a case run after another would be measured too low."""
    import httpx

    from judge.service import Database, create_token
    from tests.service.serve_process import ServeProcess
    from tests.web import synthetic

    with tempfile.TemporaryDirectory(prefix="dstj-nested-") as folder:
        data_dir = Path(folder)
        db = Database(f"sqlite:///{data_dir / 'dst-judge.db'}")
        db.migrate()
        token = create_token(db, "lab", "read,submit,review", name="bench")[0]
        db.dispose()
        auth = {"Authorization": f"Bearer {token}"}
        args = ["--jobs", "1", "--requests-per-minute", "0", "--log-level", "error"]
        with ServeProcess(data_dir, args=args, max_seconds=600) as server, \
                httpx.Client(base_url=server.url, timeout=120, trust_env=False) as client:
            assert server.process is not None
            run = client.post("/v1/bundles", headers=auth, files={
                "file": ("run.tar.gz", synthetic.bundle(synthetic.synthetic_rows(6)))})
            run.raise_for_status()
            warm = (json.dumps({**LABEL, "reviewer": "warm"}) + "\n").encode()
            client.post("/v1/files", headers=auth, data={"kind": kind},
                        files={"file": ("warm.jsonl", warm)})  # first imports, not counted
            with TreeRss(server.process.pid) as rss:
                start = time.perf_counter()
                answer = client.post("/v1/files", headers=auth, data={"kind": kind},
                                     files={"file": (name, body)})
                row: dict[str, Any] = {
                    "case": case, "sent_bytes": len(body), "status": answer.status_code,
                    "seconds": round(time.perf_counter() - start, 2),
                    "recorded_size": answer.json().get("size") if answer.is_success else None,
                    "after": ""}
                if answer.is_success and kind == "labels":
                    row["after"] = _agreement(client, auth, run.json()["id"],
                                              answer.json()["id"])
                if answer.is_success and "reviewer" in case:
                    row["after"] += "; " + _listing(client, auth)
            row.update(api_rss_growth_mb=round(rss.api_mb, 1),
                       worker_rss_growth_mb=round(rss.worker_mb, 1))
    return row


def _agreement(client: Any, auth: dict[str, str], run_id: str, file_id: str) -> str:
    """An agreement job on the accepted labels: what a worker then holds."""
    job = client.post("/v1/jobs", headers=auth, json={
        "kind": "agreement", "inputs": {"run": run_id, "human": file_id}})
    if not job.is_success:
        return f"agreement job refused {job.status_code}"
    return f"agreement job {_wait_job(client, auth, job.json()['id']).get('status')}"


def _listing(client: Any, auth: dict[str, str]) -> str:
    """Three file listings: the largest answer and the slowest."""
    sizes, times = [], []
    for _ in range(3):
        start = time.perf_counter()
        sizes.append(len(client.get("/v1/files", headers=auth).content))
        times.append(time.perf_counter() - start)
    return f"GET /v1/files: {max(sizes) / 2 ** 20:.2f} MB, {max(times):.2f} s"


def tables(rows: list[dict[str, Any]], before: list[dict[str, Any]] | None) -> list[dict]:
    earlier = {row["case"]: row for row in before or []}
    columns = ["case", "sent (bytes)", "status", "answered in (s)", "API RSS growth (MB)",
               "worker RSS growth (MB)", "then"]
    out = []
    for label, figures in (("before the fix", [earlier[r["case"]] for r in rows
                                               if r["case"] in earlier]), ("now", rows)):
        if not figures:
            continue
        out.append({"title": f"Small hostile uploads to a real dst-judge serve ({label})",
                    "columns": columns,
                    "rows": [[r["case"], r["sent_bytes"], r["status"], r["seconds"],
                              r["api_rss_growth_mb"], r["worker_rss_growth_mb"], r["after"]]
                             for r in figures],
                    "note": "Peak RSS growth while the upload (and, for an accepted labels "
                            "file, an agreement job on it) ran; the worker is the largest "
                            "growth of any process below the API."})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--before", type=Path, help="figures of a run on the code before the "
                        "fix (its --json), shown beside")
    args = parser.parse_args(argv)
    local_only()
    print("dst-judge serve (default caps, one worker process), one upload at a time:")
    rows = measure()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
    write_results("nested_upload_memory", tables(rows, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
