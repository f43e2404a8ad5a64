"""Hostile payloads and probes against a real ``dst-judge serve`` (the hostile-request suite
and ``bench/hostile.py`` share them): gzip bombs, one enormous JSON line in a small ``.gz``,
bundles whose members unpack to hundreds of MB or hold NaN, an unauthenticated upload that
announces 150 MB, and the server-side figures around each (RSS of the API process, bytes it
received, rows in its database)."""

from __future__ import annotations

import gzip
import io
import json
import re
import socket
import sqlite3
import tarfile
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TABLES = ("projects", "tokens", "blobs", "files", "jobs", "judgments", "job_calls", "labels",
          "artifacts")


def gzip_stream(chunks: Iterator[bytes]) -> bytes:
    """One gzip member of the chunks, compressed as they come (a bomb is built without
    holding what it unpacks to)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [packer.compress(chunk) for chunk in chunks]
    out.append(packer.flush())
    return b"".join(out)


def _repeat(block: bytes, total: int) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        part = block[: total - sent]
        sent += len(part)
        yield part


def gzip_bomb(packed_mb: float = 3.0) -> bytes:
    """About ``packed_mb`` MB of gzip members of zeros: some 1,000 times that unpacked."""
    member = gzip_stream(_repeat(b"\0" * (1 << 20), 100 << 20))  # 100 MB of zeros, ~100 KB
    return member * max(1, round(packed_mb * (1 << 20) / len(member)))


def one_line_gz(megabytes: int = 400, field: str = "dialogue_id") -> bytes:
    """A ``.gz`` of one JSON object whose one string is ``megabytes`` MB long (~400 KB)."""
    head = json.dumps({field: ""})[:-2].encode()
    chunks = [head, *_repeat(b"a" * (1 << 20), megabytes << 20), b'"}\n']
    return gzip_stream(iter(chunks))


def repeated_lines_gz(line: bytes, megabytes: int = 200) -> bytes:
    """A valid-looking JSON Lines ``.gz``: one good line repeated to ``megabytes`` MB."""
    return gzip_stream(_repeat(line.rstrip(b"\n") + b"\n", megabytes << 20))


class _Stream(io.RawIOBase):
    """A file object over generated chunks (a tar member too large to hold)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.rest = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            self.rest = next(self.chunks, b"")
            if not self.rest:
                return 0
        count = min(len(buffer), len(self.rest))
        buffer[:count] = self.rest[:count]
        self.rest = self.rest[count:]
        return count


BUNDLE_META = {"format": 1, "job_id": "job_0", "kind": "evaluate", "options": {},
               "inputs": {}, "status": "succeeded", "exit_code": 0}
GOOD_ROW = {"dialogue_id": "d1", "turn_index": 0, "verdict": True, "rule": "1"}


def bundle(members: dict[str, bytes | tuple[int, Iterator[bytes]]]) -> bytes:
    """A ``.tar.gz`` of ``members``: bytes, or (size, chunks) for a generated one."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as packed, \
            tarfile.open(fileobj=packed, mode="w|") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, bytes):
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.size = data[0]
                tar.addfile(info, io.BufferedReader(_Stream(data[1]), 1 << 20))
    return buffer.getvalue()


def good_bundle(**replace: bytes) -> bytes:
    members: dict[str, Any] = {
        "bundle.json": json.dumps(BUNDLE_META).encode(),
        "summary.json": b'{"tsa": 100.0, "error_turns": 0}',
        "judgments.jsonl": json.dumps(GOOD_ROW).encode() + b"\n",
        "calls.jsonl": b'{"custom_id": "c1", "attempts": []}\n'}
    members.update(replace)
    return bundle(members)


def huge_member_bundle(name: str = "summary.json", megabytes: int = 400) -> bytes:
    """A bundle (~400 KB) whose ``name`` unpacks to ``megabytes`` MB of one JSON value."""
    size = megabytes << 20
    head = b'{"a": "'
    body = _repeat(b"a" * (1 << 20), size - len(head) - 2)
    chunks = iter([head, *body, b'"}'])
    members: dict[str, Any] = {"bundle.json": json.dumps(BUNDLE_META).encode(),
                               "summary.json": b"{}",
                               "judgments.jsonl": json.dumps(GOOD_ROW).encode() + b"\n"}
    members[name] = (size, chunks)
    return bundle(members)


# --- the server's side ------------------------------------------------------------------------


def row_counts(db_path: Path) -> dict[str, int]:
    """Rows of every table a request could write, read beside the server (read-only)."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def received_bytes(url: str, admin_token: str) -> float:
    """Bytes the server process received on its sockets (its own count, in /metrics, which
    answers a token with the admin scope)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url + "/metrics",
                                     headers={"Authorization": f"Bearer {admin_token}"})
    with opener.open(request, timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^dst_judge_http_received_bytes_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else float("nan")


def announced_upload(port: int, method: str, target: str, *, headers: dict[str, str],
                     length: int, send_for: float = 3.0) -> tuple[int | None, float | None, int]:
    """Announce a body of ``length`` bytes and keep sending it, as a client that waits for
    nothing would, until the server answers (or ``send_for`` seconds pass). Returns the
    status, the seconds from the end of the headers to the first byte of the answer, and
    how much the client managed to send."""
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}",
             *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall("\r\n".join(lines).encode("latin-1"))
        start = time.monotonic()
        sock.setblocking(False)
        block, sent, answer, first = b"x" * 65536, 0, b"", None
        while time.monotonic() - start < send_for and b"\r\n" not in answer:
            try:
                if sent < length:
                    sent += sock.send(block[: length - sent])
            except BlockingIOError:
                time.sleep(0.001)
            except OSError:
                pass  # the server closed its side: read what it answered
            try:
                data = sock.recv(65536)
                if data and first is None:
                    first = time.monotonic() - start
                answer += data
                if not data:
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
        match = re.match(rb"HTTP/1\.1 (\d{3})", answer)
        return (int(match.group(1)) if match else None), first, sent
    finally:
        sock.close()


class PeakRss:
    """The largest RSS of a process while the block runs (sampled every 5 ms), and its
    growth over the RSS before: what one request made the server hold at its worst."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process = psutil.Process(pid)
        self.before = self.peak = self.process.memory_info().rss
        self._stop = False
        self._thread: Any = None

    def _sample(self) -> None:
        while not self._stop:
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except Exception:  # the process ended
                return
            time.sleep(0.005)

    def __enter__(self) -> PeakRss:
        import threading

        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop = True
        self._thread.join(5)
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.before) / 2 ** 20


def written_bytes(pid: int) -> int:
    """Bytes the process passed to write() so far (files and sockets alike; /proc io)."""
    import psutil

    return int(psutil.Process(pid).io_counters().write_chars)
