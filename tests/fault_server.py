"""A fault-injecting OpenAI-compatible chat-completions server, for tests and benchmarks.

Real endpoints rate-limit, fail, hang, drop connections, refuse and truncate; respx fixtures
cannot show how the judge behaves under load with such faults mixed in. This server answers
judge prompts with valid judgments and injects faults at configurable, seeded rates, always
on 127.0.0.1 with an ephemeral port. It runs in a background thread (:class:`FaultServer`) or
as a subprocess (:class:`ServerProcess`, or ``python tests/fault_server.py --port 0
--print-port``) so that a benchmark can keep the server's CPU out of the client's process.

Fault decisions are deterministic functions of the seed and the request, not of arrival order:

* transient kinds (``http_429``, ``http_500``, ``http_503``, ``timeout``, ``drop``) are drawn
  per attempt of a body, and only for its first ``transient_attempts`` attempts, so a client
  with at least that many retries always gets through;
* permanent kinds (``malformed``, ``truncated``, ``refusal``, ``invalid``, ``invalid_once``)
  are drawn once per *root* request (the body without the judge's re-ask messages), so
  ``invalid`` stays invalid when re-asked while ``invalid_once`` is answered on the re-ask.

Counts (total, per kind, per canonical body hash) are kept in :class:`Stats` and served as
JSON by ``GET /stats``; ``GET /stats?timeline=1`` adds every chat completion's body hash with
the times (``time.time()``) it arrived and its reply was sent, so that a benchmark can tell how
long the model was busy with a given set of bodies.

    with FaultServer(FaultConfig(latency=0.01, rates={"http_429": 0.1}, seed=1)) as server:
        judge.evaluate(judge.load_config({"base_url": server.url, ...}), ...)
        server.snapshot()["by_kind"]

    python tests/fault_server.py --port 0 --print-port --latency 0.3 \
        --rate http_503=0.05 --rate refusal=0.02 --seed 7 [--stop-on-eof] [--max-seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import email.policy
import gzip
import hashlib
import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"
"""The only address the server binds to (and the only one its helpers talk to)."""

TRANSIENT = ("http_429", "http_500", "http_503", "timeout", "drop")
PERMANENT = ("malformed", "truncated", "refusal", "invalid", "invalid_once")
OK = "ok"
KINDS = (OK, *TRANSIENT, *PERMANENT)
HOSTILE, HOSTILE_ERROR = "hostile", "hostile_error"
"""Replies of the hostile catalogue (see the end of this module): paid (a 200 with a body the
provider would bill) or not (an error status)."""
COMPLETED = frozenset({OK, "truncated", "refusal", "invalid", "invalid_once", HOSTILE})
"""Kinds answered with a 200 reply that is billed (the client must record each one)."""
ABANDONED = "abandoned"
"""A billable reply ready only after its client had given up (its timeout closed the
connection): nobody received it, so it is not counted as completed. The client saw no answer
and may send the request again; counting such a reply as paid would blame the client for a
retry its timeout made right (a real provider may bill it: the client cannot know)."""

INVALID_TEXT = "The predicted state looks right to me; I have nothing to add."
"""Prose reply of the ``invalid`` kinds; also how the server recognises a re-ask of it."""
TRUNCATED_TEXT = '{"explanation": "The predicted state of this turn looks'
REFUSAL_TEXT = "I can't help with that request."
MALFORMED_BODY = b'{"id": "chatcmpl-fault", "object": "chat.completion", "choices": [{"ind'
_STATUS = {"http_429": 429, "http_500": 500, "http_503": 503}


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON, so the client's and the test's serialisations hash alike."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def body_hash(body: Any) -> str:
    """Hash of a request body as parsed JSON (what tests compare with planned bodies)."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def _uniform(*parts: object) -> float:
    """A reproducible draw in [0, 1) from the parts (independent of hash seeds and threads)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _pick(rates: Mapping[str, float], kinds: tuple[str, ...], u: float) -> str | None:
    """The kind whose cumulative-rate band holds ``u``, or None (no fault)."""
    edge = 0.0
    for kind in kinds:
        edge += rates.get(kind, 0.0)
        if u < edge:
            return kind
    return None


@dataclass(frozen=True)
class FaultConfig:
    """Latency and seeded fault rates; rates are probabilities per attempt (transient kinds)
    or per root request (permanent kinds), each group summing to at most 1."""

    latency: float = 0.0
    rates: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    transient_attempts: int = 1
    retry_after: float | None = 0.0
    hang: float = 5.0
    batch_seconds: float = 0.0
    """How long a batch stays ``in_progress`` before its (already billed) output shows."""

    def __post_init__(self) -> None:
        unknown = set(self.rates) - set(TRANSIENT) - set(PERMANENT)
        if unknown:
            raise ValueError(f"unknown fault kind(s): {sorted(unknown)}; known: {KINDS[1:]}")
        for group in (TRANSIENT, PERMANENT):
            if any(self.rates.get(k, 0.0) < 0 for k in group):
                raise ValueError("fault rates must be >= 0")
            if sum(self.rates.get(k, 0.0) for k in group) > 1.0 + 1e-9:
                raise ValueError(f"the rates of {group} sum to more than 1")
        if (self.latency < 0 or self.hang < 0 or self.transient_attempts < 0
                or self.batch_seconds < 0):
            raise ValueError("latency, hang, transient_attempts and batch_seconds must be >= 0")

    def to_args(self) -> list[str]:
        """The command-line flags that rebuild this configuration in a subprocess."""
        args = ["--latency", repr(self.latency), "--seed", str(self.seed),
                "--transient-attempts", str(self.transient_attempts), "--hang", repr(self.hang),
                "--batch-seconds", repr(self.batch_seconds)]
        if self.retry_after is not None:
            args += ["--retry-after", repr(self.retry_after)]
        for kind, rate in self.rates.items():
            args += ["--rate", f"{kind}={rate!r}"]
        return args


@dataclass
class BodyStats:
    """What happened to one distinct request body."""

    received: int = 0
    completed: int = 0
    kinds: list[str] = field(default_factory=list)
    root: str | None = None  # hash of the original request when this body is a re-ask


class Stats:
    """Thread-safe request counts: what a test compares with the client's own counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.by_kind: Counter[str] = Counter()
        self.bodies: dict[str, BodyStats] = {}
        self.tokens: Counter[str] = Counter()
        self.other = 0  # requests that were not chat completions (bad path, bad JSON)
        self.connections = 0  # TCP connections that carried completions (keep-alive reuse)
        self.first_at: float | None = None  # time.time() of the first and last request
        self.last_at: float | None = None
        self.timeline: list[tuple[str, float, float]] = []  # (body hash, arrived, replied)

    def attempt(self, key: str, root: str | None) -> int:
        """Register a received body and return how many times it was received before."""
        with self._lock:
            self.total += 1
            self.last_at = time.time()
            if self.first_at is None:
                self.first_at = self.last_at
            entry = self.bodies.get(key)
            if entry is None:
                entry = self.bodies[key] = BodyStats(root=root)
            entry.received += 1
            return entry.received - 1

    def served(self, key: str, kind: str, usage: Mapping[str, int] | None) -> None:
        """Record the kind a body was answered with (and its token usage when completed)."""
        with self._lock:
            self.by_kind[kind] += 1
            entry = self.bodies[key]
            entry.kinds.append(kind)
            if kind in COMPLETED:
                entry.completed += 1
                self.tokens.update(usage or {})

    def timed(self, key: str, arrived: float, replied: float) -> None:
        """Record when a chat completion's body arrived and when its answer was sent (or the
        connection dropped)."""
        with self._lock:
            self.timeline.append((key, arrived, replied))

    def connected(self) -> None:
        with self._lock:
            self.connections += 1

    def bad_request(self) -> None:
        with self._lock:
            self.total += 1
            self.other += 1

    def reset(self) -> None:
        with self._lock:
            self.total = self.other = self.connections = 0
            self.first_at = self.last_at = None
            self.by_kind.clear()
            self.bodies.clear()
            self.tokens.clear()
            self.timeline.clear()

    def snapshot(self, *, bodies: bool = True, timeline: bool = False) -> dict[str, Any]:
        """A JSON-able copy: totals, per kind, derived counts and (optionally) per body and
        the timeline of chat completions (``[body hash, arrived, replied]`` rows, by arrival)."""
        with self._lock:
            by_kind = {k: self.by_kind.get(k, 0)
                       for k in (*KINDS, HOSTILE, HOSTILE_ERROR, ABANDONED)}
            data: dict[str, Any] = {
                "total": self.total, "other": self.other, "connections": self.connections,
                "by_kind": by_kind,
                "transient": sum(by_kind[k] for k in TRANSIENT),
                "completed": sum(by_kind[k] for k in COMPLETED),
                "answered": self.total - by_kind["timeout"] - by_kind["drop"]
                - by_kind[ABANDONED],
                "distinct_bodies": len(self.bodies),
                "roots": sum(1 for b in self.bodies.values() if b.root is None),
                "reask_requests": sum(b.received for b in self.bodies.values() if b.root),
                "reasks_completed": sum(b.completed for b in self.bodies.values() if b.root),
                "max_completed_per_body": max(
                    (b.completed for b in self.bodies.values()), default=0),
                "tokens": dict(self.tokens),
                "process_cpu_s": time.process_time(),  # the whole process: see ServerProcess
                "first_request_at": self.first_at, "last_request_at": self.last_at,
            }
            if bodies:
                data["bodies"] = {k: {"received": b.received, "completed": b.completed,
                                      "kinds": list(b.kinds), "root": b.root}
                                  for k, b in self.bodies.items()}
            if timeline:
                # by arrival: rows are recorded once a reply is written, by the request's
                # own thread, so under load they are recorded out of order
                data["timeline"] = [list(row) for row in sorted(self.timeline,
                                                                key=lambda r: r[1])]
            return data


@dataclass(frozen=True)
class Decision:
    """How to answer one request."""

    key: str
    root: str
    kind: str
    result_keys: tuple[str, ...]


def result_keys(body: Mapping[str, Any]) -> tuple[str, ...]:
    """Which judgment keys the prompt asks for, read from its system message."""
    messages = body.get("messages") or []
    system = next((m.get("content") for m in messages
                   if isinstance(m, dict) and m.get("role") == "system"), None)
    if isinstance(system, str):
        keys = tuple(k for k in ("incorrect_domain_slot", "missed_domain_slot")
                     if f'"{k}"' in system)
        if keys:
            return keys
    name = str(((body.get("response_format") or {}).get("json_schema") or {}).get("name", ""))
    return ("missed_domain_slot",) if name.endswith("completeness") else ("incorrect_domain_slot",)


def split_reask(body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The root request of a body and whether the body is a re-ask of an invalid reply."""
    messages = list(body.get("messages") or [])
    for index, message in enumerate(messages):
        if (isinstance(message, dict) and message.get("role") == "assistant"
                and message.get("content") == INVALID_TEXT):
            return {**body, "messages": messages[:index]}, True
    return dict(body), False


class Decider:
    """Turns (seed, body, attempt number) into a fault kind; reproducible across runs."""

    def __init__(self, config: FaultConfig, stats: Stats) -> None:
        self.config = config
        self.stats = stats

    def decide(self, body: Mapping[str, Any]) -> Decision:
        key = body_hash(body)
        root_body, is_reask = split_reask(body)
        root = body_hash(root_body) if is_reask else key
        previous = self.stats.attempt(key, root if is_reask else None)
        rates, seed = self.config.rates, self.config.seed
        kind: str | None = None
        if previous < self.config.transient_attempts:
            kind = _pick(rates, TRANSIENT, _uniform(seed, "transient", key, previous))
        if kind is None:
            kind = _pick(rates, PERMANENT, _uniform(seed, "permanent", root)) or OK
            if is_reask and kind != "invalid":
                kind = OK  # invalid_once is answered when re-asked (nothing else is re-asked)
        return Decision(key, root, kind, result_keys(body))


def completion_json(body: Mapping[str, Any], decision: Decision,
                    serial: int) -> tuple[dict[str, Any], dict[str, int]]:
    """A chat.completion for the decision's kind, with usage that looks like a real server's."""
    kind = decision.kind
    content: str | None
    refusal: str | None = None
    finish = "stop"
    if kind == "truncated":
        content, finish = TRUNCATED_TEXT, "length"
    elif kind == "refusal":
        content, refusal = None, REFUSAL_TEXT
    elif kind in ("invalid", "invalid_once"):
        content = INVALID_TEXT
    else:
        content = json.dumps({"explanation": "ok", **{k: {} for k in decision.result_keys}})
    texts = [m for m in body.get("messages") or []
             if isinstance(m, dict) and isinstance(m.get("content"), str)]
    static = sum(len(m["content"]) for m in texts if m.get("role") == "system")
    usage = {"prompt_tokens": sum(len(m["content"]) for m in texts) // 4 + 1,
             "completion_tokens": len(content or refusal or "") // 4 + 1,
             "cached_prompt_tokens": static // 4}  # as if the system prefix were cached
    reply = {
        "id": f"chatcmpl-fault-{serial}", "object": "chat.completion",
        "created": int(time.time()), "model": str(body.get("model") or "fault-model"),
        "choices": [{"index": 0, "finish_reason": finish,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": usage["prompt_tokens"],
                  "completion_tokens": usage["completion_tokens"],
                  "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
                  "prompt_tokens_details": {"cached_tokens": usage["cached_prompt_tokens"]}},
    }
    return reply, usage


class _Server(ThreadingHTTPServer):
    """Threads per connection, a deep accept queue (64 clients connect at once) and a record
    of open sockets so that stopping never waits on an idle keep-alive connection."""

    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True

    def __init__(self, config: FaultConfig, port: int) -> None:
        self.config = config
        self.stats = Stats()
        self.decider = Decider(config, self.stats)
        self.stopping = threading.Event()
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._serial = 0
        self.files: dict[str, bytes] = {}  # the Batch API's files and batches (see _batch_api)
        self.batches: dict[str, dict[str, Any]] = {}
        self.batches_held = threading.Event()
        """While set, every batch shows as ``in_progress`` whatever its ``batch_seconds``
        (``POST /batches-held``): a test decides when batches finish, not the clock."""
        super().__init__((HOST, port), _Handler)

    def next_serial(self) -> int:
        with self._open_lock:
            self._serial += 1
            return self._serial

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that died mid-request (kill -9 tests) is normal here: no traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def close_open_connections(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions`` with injected faults; ``GET /stats`` (``?bodies=0``: no
    per-body table; ``?timeline=1``: when each completion arrived and was answered) and
    ``POST /reset`` for the counts; ``POST /batches-held`` (``{"held": true}``) to keep
    every batch in progress until it is posted again with ``false``; ``GET /health``."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers and the SDK expect
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    timeout = 60  # an idle connection's thread ends by itself
    server: _Server

    def setup(self) -> None:
        super().setup()
        self._carried_completions = False  # one handler per connection

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: thousands of requests per benchmark."""

    def _client_gone(self) -> bool:
        """Whether the client closed its connection before being answered (it gave up: its
        timeout). A waiting client sends nothing more, so a readable socket means EOF."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _bill(self, key: str, kind: str, usage: Mapping[str, int] | None) -> None:
        """Count the answer about to be sent: a billable one whose client has already gone
        is :data:`ABANDONED`, not completed (see there)."""
        if kind in COMPLETED and self._client_gone():
            self.server.stats.served(key, ABANDONED, None)
        else:
            self.server.stats.served(key, kind, usage)

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (its timeout) or the server is stopping
            self.close_connection = True

    def _send_json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), headers)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._batch_api("GET", path, b""):
            return
        if path == "/stats":
            self._send_json(200, self.server.stats.snapshot(
                bodies="bodies=0" not in self.path, timeline="timeline=1" in self.path))
        elif path == "/health":
            self._send_json(200, {"ok": True})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        arrived = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/reset":
            self.server.stats.reset()
            self._send_json(200, {"ok": True})
            return
        if path == "/batches-held":
            held = json.loads(raw or b"{}").get("held") is True
            (self.server.batches_held.set if held else self.server.batches_held.clear)()
            self._send_json(200, {"held": held})
            return
        if self._batch_api("POST", path, raw):
            return
        if path.startswith(HOSTILE_PREFIX):
            self._hostile(path, raw)
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self.server.stats.bad_request()
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            self.server.stats.bad_request()
            self._send_json(400, {"error": {"message": f"request body is not JSON: {exc}"}})
            return
        server = self.server
        if not self._carried_completions:
            self._carried_completions = True
            server.stats.connected()
        decision = server.decider.decide(body)
        try:
            self._complete(body, decision)
        finally:
            server.stats.timed(decision.key, arrived, time.time())

    def _complete(self, body: dict[str, Any], decision: Decision) -> None:
        """Answer a chat completion as the decision says (after the configured latency)."""
        server = self.server
        kind = decision.kind
        if kind == "timeout":
            # Counted first (the client gives up long before we wake); then hang past the
            # client's timeout and close without a word.
            server.stats.served(decision.key, kind, None)
            server.stopping.wait(server.config.hang)
            self.close_connection = True
            return
        if server.config.latency:
            server.stopping.wait(server.config.latency)
        if kind == "drop":
            server.stats.served(decision.key, kind, None)
            self.close_connection = True
            return
        if kind in _STATUS:
            server.stats.served(decision.key, kind, None)
            headers = {}
            if kind == "http_429" and server.config.retry_after is not None:
                headers["retry-after"] = f"{server.config.retry_after:g}"
            self._send_json(_STATUS[kind], {"error": {
                "message": f"injected fault {kind}", "type": "fault_injection"}}, headers)
            return
        if kind == "malformed":
            server.stats.served(decision.key, kind, None)
            self._send(200, MALFORMED_BODY)
            return
        reply, usage = completion_json(body, decision, server.next_serial())
        self._bill(decision.key, kind, usage)
        self._send_json(200, reply)

    def _batch_api(self, method: str, path: str, raw: bytes) -> bool:
        """The Batch API's files and batches endpoints (``/v1/files``, ``/v1/batches``, under
        ``/hostile/<kind>`` too); False when ``path`` is not one of them.

        Each request line is answered (and billed) at creation as a live call would be, or with
        the hostile entry's reply; ``http-401-echo`` refuses every call. The batch shows as
        ``in_progress`` for ``batch_seconds``, then ``completed`` unless it was cancelled
        (``POST /batches/<id>/cancel``); ``GET /batches`` lists every batch created
        under the same path prefix, newest first.
        """
        kind = None
        if path.startswith(HOSTILE_PREFIX):
            kind, _, path = path[len(HOSTILE_PREFIX):].partition("/")
            path = "/" + path
        path = path.removeprefix("/v1")
        if not path.startswith(("/files", "/batches")):
            return False
        token = self.headers.get("authorization", "").removeprefix("Bearer ")
        if kind == "http-401-echo":
            self._send_json(401, {"error": {"message": f"Incorrect API key provided: {token}",
                                            "type": "invalid_request_error"}})
            return True
        server, parts = self.server, path.strip("/").split("/")
        if method == "POST" and parts == ["files"]:
            content = _multipart_file(self.headers.get("Content-Type", ""), raw)
            file_id = f"file-{server.next_serial()}"
            server.files[file_id] = content
            self._send_json(200, {"id": file_id, "object": "file", "bytes": len(content),
                                  "created_at": int(time.time()), "filename": "requests.jsonl",
                                  "purpose": "batch", "status": "processed"})
        elif method == "POST" and parts == ["batches"]:
            request = json.loads(raw)
            lines = server.files[request["input_file_id"]].decode("utf-8").splitlines()
            output = [self._batch_line(json.loads(line), kind, token) for line in lines if line]
            out_id, batch_id = f"file-{server.next_serial()}", f"batch_{server.next_serial()}"
            server.files[out_id] = "".join(json.dumps(o) + "\n" for o in output).encode()
            server.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": request["endpoint"],
                "input_file_id": request["input_file_id"], "completion_window": "24h",
                "status": "completed", "created_at": int(time.time()),
                "output_file_id": out_id, "error_file_id": None,
                "request_counts": {"total": len(output), "completed": len(output), "failed": 0},
                "metadata": request.get("metadata"), "hostile_kind": kind}
            server.batches[batch_id]["ready_at"] = time.time() + server.config.batch_seconds
            self._send_json(200, self._batch_view(server.batches[batch_id]))
        elif method == "GET" and parts == ["batches"]:
            newest_first = reversed(list(server.batches.values()))  # as OpenAI lists them
            self._send_json(200, {"object": "list", "has_more": False,
                                  "data": [self._batch_view(b) for b in newest_first
                                           if b.get("hostile_kind") == kind]})
        elif method == "GET" and len(parts) == 2 and parts[0] == "batches" \
                and parts[1] in server.batches:
            self._send_json(200, self._batch_view(server.batches[parts[1]]))
        elif method == "POST" and len(parts) == 3 and parts[0] == "batches" \
                and parts[2] == "cancel" and parts[1] in server.batches:
            batch = server.batches[parts[1]]
            if self._batch_view(batch)["status"] == "in_progress":
                batch["cancelled_at"] = int(time.time())
            self._send_json(200, self._batch_view(batch))
        elif method == "GET" and len(parts) == 3 and parts[0] == "files" \
                and parts[2] == "content" and parts[1] in server.files:
            self._send(200, server.files[parts[1]], {"Content-Type": "application/jsonl"})
        else:
            self._send_json(404, {"error": {"message": f"no route {method} {path}"}})
        return True

    def _batch_view(self, batch: dict[str, Any]) -> dict[str, Any]:
        """A batch as the API shows it now: in progress (no output yet), cancelled or done."""
        view = {k: v for k, v in batch.items()
                if k not in ("ready_at", "cancelled_at", "hostile_kind")}
        if batch.get("cancelled_at") is not None:
            view.update(status="cancelled", output_file_id=None)
        elif self.server.batches_held.is_set() or time.time() < batch.get("ready_at", 0.0):
            total = view["request_counts"]["total"]
            view.update(status="in_progress", output_file_id=None,
                        request_counts={"total": total, "completed": 0, "failed": 0})
        return view

    def _batch_line(self, line: dict[str, Any], kind: str | None, token: str) -> dict[str, Any]:
        """The output line of one request line, billed like a live call."""
        body, server = line["body"], self.server
        if kind is None:
            # the configured fault rates apply to batch lines too: a transient kind fails the
            # line (a per-request error in the output, as the provider reports one), a
            # permanent kind is its 200 reply
            decision = server.decider.decide(body)
            key = decision.key
            if decision.kind in TRANSIENT:
                server.stats.served(key, decision.kind, None)
                return {"id": f"batch_req_{server.next_serial()}",
                        "custom_id": line["custom_id"],
                        "response": {"status_code": _STATUS.get(decision.kind, 500),
                                     "request_id": "req",
                                     "body": {"error": {"message": f"injected fault "
                                                                   f"{decision.kind}",
                                                        "type": "fault_injection"}}},
                        "error": None}
            reply, usage = completion_json(body, decision, server.next_serial())
            status, payload = 200, reply
            server.stats.served(key, decision.kind, usage)
        else:
            key = body_hash(body)
            attempt = server.stats.attempt(key, None)
            decision = Decision(key, key, OK, result_keys(body))
            answer = HOSTILE_REPLIES[kind](Hostile(body, decision, server.next_serial(), token,
                                                   attempt))
            status = answer.status
            try:
                payload = json.loads(answer.content)
            except ValueError:
                payload = answer.content.decode("utf-8", "replace")
            server.stats.served(key, HOSTILE if answer.paid else HOSTILE_ERROR,
                                answer.usage if answer.paid else None)
        return {"id": f"batch_req_{server.next_serial()}", "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": "req", "body": payload},
                "error": None}

    def _hostile(self, path: str, raw: bytes) -> None:
        """``POST /hostile/<kind>/v1/chat/completions``: answer with that catalogue entry."""
        kind = path[len(HOSTILE_PREFIX):].split("/", 1)[0]
        build = HOSTILE_REPLIES.get(kind)
        try:
            body = json.loads(raw)
            if build is None or not isinstance(body, dict):
                raise ValueError(f"unknown hostile kind {kind!r}" if build is None
                                 else "not an object")
        except ValueError as exc:
            self.server.stats.bad_request()
            self._send_json(400, {"error": {"message": f"bad hostile request: {exc}"}})
            return
        server = self.server
        messages = list(body.get("messages") or [])
        first_answer = next((n for n, m in enumerate(messages)
                             if isinstance(m, dict) and m.get("role") == "assistant"), None)
        key = body_hash(body)
        root = body_hash({**body, "messages": messages[:first_answer]}) \
            if first_answer is not None else None  # a re-ask: its root is the first request
        attempt = server.stats.attempt(key, root)
        decision = Decision(key, root or key, OK, result_keys(body))
        token = self.headers.get("authorization", "").removeprefix("Bearer ")
        reply = build(Hostile(body, decision, server.next_serial(), token, attempt))
        self._bill(decision.key, HOSTILE if reply.paid else HOSTILE_ERROR,
                   reply.usage if reply.paid else None)
        if reply.drip is None:
            self._send(reply.status, reply.content, reply.headers)
            return
        try:  # a byte at a time, slowly: only a total timeout ends this
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.content)))
            self.end_headers()
            for byte in reply.content:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if server.stopping.wait(reply.drip):
                    break
        except OSError:
            pass
        self.close_connection = True


class FaultServer:
    """The server in a background thread of this process: ``with FaultServer(cfg) as s:``."""

    def __init__(self, config: FaultConfig | None = None, *, port: int = 0) -> None:
        self.config = config or FaultConfig()
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FaultServer:
        if self._server is not None:
            raise RuntimeError("already started")
        self._server = _Server(self.config, self._port)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fault-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers, close connections and join every thread."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.close_open_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> _Server:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return self._server

    @property
    def port(self) -> int:
        return int(self.running.server_address[1])

    @property
    def url(self) -> str:
        """The ``base_url`` for the judge (``http://127.0.0.1:PORT/v1``)."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def stats(self) -> Stats:
        return self.running.stats

    def snapshot(self, *, bodies: bool = True, timeline: bool = False) -> dict[str, Any]:
        return self.stats.snapshot(bodies=bodies, timeline=timeline)


def _local_opener() -> urllib.request.OpenerDirector:
    """urllib without proxies: the helpers only ever talk to 127.0.0.1."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_json(port: int, path: str, *, timeout: float = 10.0) -> Any:
    """``GET http://127.0.0.1:PORT/path`` as JSON."""
    with _local_opener().open(f"http://{HOST}:{port}{path}", timeout=timeout) as response:
        return json.loads(response.read())


def post_json(port: int, path: str, body: Any, *, timeout: float = 10.0) -> tuple[int, bytes]:
    """``POST`` a JSON body to 127.0.0.1; returns status and raw reply (errors included)."""
    request = urllib.request.Request(f"http://{HOST}:{port}{path}", method="POST",
                                     data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
    try:
        with _local_opener().open(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class ServerProcess:
    """The server as a subprocess (its CPU is not the client's): ``with ServerProcess(cfg)``.

    The child exits when its stdin closes, on SIGTERM, or after ``max_seconds``.
    """

    def __init__(self, config: FaultConfig | None = None, *, max_seconds: float = 3600.0,
                 start_timeout: float = 15.0) -> None:
        self.config = config or FaultConfig()
        self.max_seconds = max_seconds
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    def start(self) -> ServerProcess:
        command = [sys.executable, str(Path(__file__).resolve()), "--port", "0", "--print-port",
                   "--stop-on-eof", "--max-seconds", repr(self.max_seconds),
                   *self.config.to_args()]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], self.start_timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the fault server did not start (said {line!r})")
        self.port = int(line)
        return self

    def stop(self) -> int | None:
        """End the child (stdin EOF, then SIGTERM, then SIGKILL) and return its exit code."""
        process, self.process = self.process, None
        if process is None:
            return None
        with contextlib.suppress(OSError):
            if process.stdin:
                process.stdin.close()
        try:
            return process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                return process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                return process.wait(timeout=5)
        finally:
            if process.stdout:
                process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def reset(self) -> None:
        """``POST /reset``: zero the child's counts (between benchmark runs)."""
        post_json(self.port, "/reset", {})

    def hold_batches(self, held: bool = True) -> None:
        """``POST /batches-held``: keep every batch in progress (or let them finish)."""
        status, reply = post_json(self.port, "/batches-held", {"held": held})
        if status != 200:
            raise RuntimeError(f"/batches-held answered {status}: {reply!r}")

    def snapshot(self, *, bodies: bool = True, timeline: bool = False) -> dict[str, Any]:
        """``GET /stats`` of the child."""
        query = "&".join(q for q, on in (("bodies=0", not bodies), ("timeline=1", timeline))
                         if on)
        return dict(get_json(self.port, "/stats" + (f"?{query}" if query else ""),
                             timeout=60.0))


def _multipart_file(content_type: str, raw: bytes) -> bytes:
    """The ``file`` field of a multipart/form-data upload (the SDK's files.create)."""
    message = BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True) or b""
    raise ValueError("no file in the upload")


# --- test data ---------------------------------------------------------------------------------

def replicate_examples(examples: Path, out_dir: Path, copies: int) -> tuple[Path, Path, Path]:
    """Write ``copies`` renamed copies of the example dialogues and predictions, each copy's
    utterances tagged so every prompt (and so every request body) is distinct.

    Returns the schema, dialogues and predictions paths.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    dialogues = [json.loads(line) for line in
                 (examples / "dialogues.jsonl").read_text(encoding="utf-8").splitlines() if line]
    predictions = [json.loads(line) for line in
                   (examples / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
                   if line]
    d_lines, p_lines = [], []
    for copy in range(copies):
        for dialogue in dialogues:
            turns = [{**t, "user": f"{t['user']} (copy {copy})"} for t in dialogue["turns"]]
            d_lines.append(json.dumps({**dialogue, "dialogue_id": _copy_id(dialogue, copy),
                                       "turns": turns}))
        for pred in predictions:
            p_lines.append(json.dumps({**pred, "dialogue_id": _copy_id(pred, copy)}))
    d_path, p_path = out_dir / "dialogues.jsonl", out_dir / "predictions.jsonl"
    d_path.write_text("\n".join(d_lines) + "\n", encoding="utf-8")
    p_path.write_text("\n".join(p_lines) + "\n", encoding="utf-8")
    return examples / "schema.json", d_path, p_path


def _copy_id(item: Mapping[str, Any], copy: int) -> str:
    return f"{str(item['dialogue_id']).removesuffix('.json')}-C{copy:04d}"


# --- command line ------------------------------------------------------------------------------

def _parse_rate(text: str) -> tuple[str, float]:
    kind, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KIND=RATE, got {text!r}")
    return kind.strip(), float(value)


def _watch_stdin(stop: threading.Event) -> None:
    """Stop when the parent closes our stdin (it ended or forgot us)."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.read(4096):
            pass
    stop.set()


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT/SIGTERM, stdin EOF (``--stop-on-eof``) or ``--max-seconds``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--print-port", action="store_true", help="print the port, then serve")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=_parse_rate, action="append", default=[],
                        metavar="KIND=RATE", help=f"fault rate; kinds: {', '.join(KINDS[1:])}")
    parser.add_argument("--transient-attempts", type=int, default=1,
                        help="transient faults only on the first N attempts of a body")
    parser.add_argument("--retry-after", type=float, default=0.0,
                        help="retry-after of 429 replies in seconds (negative: no header)")
    parser.add_argument("--hang", type=float, default=5.0, help="seconds a timeout fault hangs")
    parser.add_argument("--batch-seconds", type=float, default=0.0,
                        help="seconds a batch stays in progress")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="lifetime bound")
    parser.add_argument("--stop-on-eof", action="store_true", help="stop when stdin closes")
    args = parser.parse_args(argv)
    config = FaultConfig(latency=args.latency, rates=dict(args.rate), seed=args.seed,
                         transient_attempts=args.transient_attempts,
                         retry_after=args.retry_after if args.retry_after >= 0 else None,
                         hang=args.hang, batch_seconds=args.batch_seconds)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with FaultServer(config, port=args.port) as server:
        if args.print_port:
            print(server.port, flush=True)
        else:
            print(f"fault server on {server.url}", flush=True)
        if args.stop_on_eof:
            threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
        deadline = time.monotonic() + args.max_seconds
        while not stop.is_set() and time.monotonic() < deadline:
            stop.wait(min(1.0, max(0.0, deadline - time.monotonic())))
    return 0


# --- hostile replies ---------------------------------------------------------------------------
#
# What a broken or malicious OpenAI-compatible server (or proxy) can send with HTTP 200, and a
# few error statuses with hostile bodies or headers. ``base_url`` selects the entry:
# ``http://127.0.0.1:PORT/hostile/<kind>/v1``. Every 200 reply counts as a paid completion of
# its request body (``Stats``): the client must record each one, never pay for a body twice
# and never take a malformed one as a verdict. ``token`` is the bearer token the client sent,
# which several entries echo back (the client must never store or print it).

HOSTILE_PREFIX = "/hostile/"


@dataclass(frozen=True)
class Hostile:
    """One request as a catalogue entry sees it."""

    body: Mapping[str, Any]
    decision: Decision
    serial: int
    token: str
    attempt: int

    def valid(self) -> dict[str, Any]:
        """The well-formed chat.completion the fault server would send."""
        return completion_json(self.body, self.decision, self.serial)[0]

    def judgment(self, **extra: Any) -> str:
        return json.dumps({"explanation": "ok", **{k: {} for k in self.decision.result_keys},
                           **extra})


@dataclass(frozen=True)
class HostileReply:
    status: int
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    drip: float | None = None
    """Seconds between single bytes (a trickling server), or None to send at once."""

    @property
    def paid(self) -> bool:
        return self.status == 200

    @property
    def usage(self) -> dict[str, int]:
        return {"prompt_tokens": 1, "completion_tokens": 1, "cached_prompt_tokens": 0}


def _json(data: Any, status: int = 200, **headers: str) -> HostileReply:
    return HostileReply(status, json.dumps(data).encode("utf-8"), headers)


def _mutated(change: Any) -> Any:
    """An entry: the valid reply with ``change(reply, request)`` applied."""
    def build(request: Hostile) -> HostileReply:
        reply = request.valid()
        change(reply, request)
        return _json(reply)
    return build


def _set(path: str, value: Any) -> Any:
    """An entry setting one field of the valid reply (``usage.prompt_tokens``,
    ``choices.0.message.content``); ``value`` may be a function of the request."""
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]

    def change(reply: dict[str, Any], request: Hostile) -> None:
        target: Any = reply
        for part in parts[:-1]:
            target = target[part]
        target[parts[-1]] = value(request) if callable(value) else value
    return _mutated(change)


def _drop(path: str) -> Any:
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]

    def change(reply: dict[str, Any], request: Hostile) -> None:
        target: Any = reply
        for part in parts[:-1]:
            target = target[part]
        del target[parts[-1]]
    return _mutated(change)


def _raw(content: bytes | Any, status: int = 200, **headers: str) -> Any:
    def build(request: Hostile) -> HostileReply:
        data = content(request) if callable(content) else content
        return HostileReply(status, data, headers)
    return build


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


_FILLER: dict[int, bytes] = {}


def _big_reply(size: int) -> Any:
    """A valid reply whose content is ``size`` x's. The x's are made once and spliced into the
    JSON: encoding 50 MB anew for each request costs the server (a thread of the test's
    process) about a second of the GIL, long enough on a busy machine to outlast the client's
    timeout before any answer is sent."""
    def build(request: Hostile) -> HostileReply:
        reply = request.valid()
        reply["choices"][0]["message"]["content"] = "<filler>"
        head, _, tail = json.dumps(reply).encode("utf-8").partition(b'"<filler>"')
        filler = _FILLER.setdefault(size, b"x" * size)
        return HostileReply(200, b"".join((head, b'"', filler, b'"', tail)))
    return build


_BOMB: dict[int, bytes] = {}


def gzip_bomb(blocks: int = 200) -> bytes:
    """A valid gzip stream of ``blocks`` MB of zeros (about 1,000:1). After a full flush
    deflate starts afresh, so the compressed form of every further zero block is the same
    bytes: compress two, repeat the second (fast), and write the trailer by hand."""
    if blocks not in _BOMB:
        block = b"\0" * 1_000_000
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        crc = 0
        for _ in range(blocks):
            crc = zlib.crc32(block, crc)
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        trailer = crc.to_bytes(4, "little") + (blocks * len(block) % 2**32).to_bytes(4, "little")
        _BOMB[blocks] = (header + first + again * (blocks - 1) + packer.flush() + trailer)
    return _BOMB[blocks]


def _encoded(encoding: str, pack: Any) -> Any:
    def build(request: Hostile) -> HostileReply:
        return HostileReply(200, pack(json.dumps(request.valid()).encode("utf-8")),
                            {"Content-Encoding": encoding})
    return build


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def _echo(request: Hostile) -> str:
    return f"echo {request.token} echo"


def _first_then_ok(status: int, **headers: str) -> Any:
    """An error status with hostile headers on the first attempt, then a valid reply."""
    def build(request: Hostile) -> HostileReply:
        if request.attempt == 0:
            return _json({"error": {"message": "slow down"}}, status, **headers)
        return _json(request.valid())
    return build


HOSTILE_REPLIES: dict[str, Any] = {
    # usage figures of the wrong type or range
    "usage-prompt-string": _set("usage.prompt_tokens", "12"),
    "usage-prompt-words": _set("usage.prompt_tokens", "lots"),
    "usage-completion-string": _set("usage.completion_tokens", "3"),
    "usage-negative": _set("usage.prompt_tokens", -5),
    "usage-float": _set("usage.completion_tokens", 1.5),
    "usage-bool": _set("usage.prompt_tokens", True),
    "usage-huge": _set("usage.prompt_tokens", 10**30),
    "usage-list": _set("usage", [1, 2]),
    "usage-string": _set("usage", "plenty"),
    "usage-details-string": _set("usage.prompt_tokens_details", "none"),
    "usage-cached-string": _set("usage.prompt_tokens_details.cached_tokens", "7"),
    "usage-null": _set("usage", None),  # valid: a server that does not count
    # choices of the wrong shape
    "choices-string": _set("choices", "the answer"),
    "choices-object": _set("choices", {"0": {"message": {"content": "{}"}}}),
    "choices-empty": _set("choices", []),
    "choices-null": _set("choices", None),
    "choices-missing": _drop("choices"),
    "choices-numbers": _set("choices", [1, 2]),
    "choices-strings": _set("choices", ["{}"]),
    "choice-message-missing": _drop("choices.0.message"),
    "choice-message-string": _set("choices.0.message", "hello"),
    "choice-message-null": _set("choices.0.message", None),
    "choice-message-list": _set("choices.0.message", [{"content": "{}"}]),
    # message content of the wrong type
    "content-number": _set("choices.0.message.content", 42),
    "content-bool": _set("choices.0.message.content", True),
    "content-object": _set("choices.0.message.content", {"explanation": "x"}),
    "content-list-numbers": _set("choices.0.message.content", [1, 2, 3]),
    "content-list-strings": _set("choices.0.message.content", ["{}", "{}"]),
    "content-list-image": _set("choices.0.message.content",
                               [{"type": "image_url", "image_url": {"url": "data:,"}}]),
    "content-list-text-number": _set("choices.0.message.content",
                                     [{"type": "text", "text": 5}]),
    "content-text-parts": _set("choices.0.message.content",  # valid: text parts
                               lambda r: [{"type": "text", "text": r.judgment()}]),
    "content-deep-string": _set("choices.0.message.content",
                                lambda r: '{"explanation": ' + _deep(40_000) + "}"),
    "content-deep-string-100k": _set("choices.0.message.content",
                                     lambda r: '{"explanation": ' + _deep(100_000) + "}"),
    "content-deep-json": _set("choices.0.message.content", json.loads(_deep(10))),
    "content-nul": _set("choices.0.message.content", lambda r: r.judgment() + "\0\0"),
    "content-long": _set("choices.0.message.content",
                         lambda r: r.judgment(explanation="y" * 200_000)),
    "content-markup": _set("choices.0.message.content",  # valid, printed safely
                           lambda r: r.judgment(explanation="[/x] [bold \x1b[31mred\x07")),
    "content-bidi": _set("choices.0.message.content",
                         lambda r: r.judgment(explanation="\u202eevil\u2066 \u2028next")),
    "content-values-odd": _set("choices.0.message.content",  # slot values of odd types
                               lambda r: json.dumps({"explanation": "odd", **{
                                   k: {"hotel-area": {"x": [1, {"y": None}]},
                                       "hotel-stars": 1e308, "train-day": True,
                                       "[/x]": "[bold"} for k in r.decision.result_keys}})),
    "content-keys-odd": _set("choices.0.message.content",
                             lambda r: json.dumps({"explanation": ["a", "b"], **{
                                 k: [["hotel-area", "north"], 7] for k in
                                 r.decision.result_keys}})),
    # refusal and finish_reason of the wrong type, or hostile text in them
    "refusal-number": _set("choices.0.message.refusal", 7),
    "refusal-object": _set("choices.0.message.refusal", {"why": "no"}),
    "refusal-markup": _set("choices.0.message.refusal", "[/x] I [bold refuse \x1b[2J"),
    "refusal-echo": _set("choices.0.message.refusal", _echo),
    "finish-number": _set("choices.0.finish_reason", 1),
    "finish-object": _set("choices.0.finish_reason", {"type": "stop"}),
    "finish-length": _set("choices.0.finish_reason", "length"),
    # the key echoed into reply metadata and content
    "echo-metadata": _mutated(lambda reply, r: reply.update(
        id=_echo(r), model=_echo(r), system_fingerprint=_echo(r))),
    "echo-content": _set("choices.0.message.content",
                         lambda r: r.judgment(explanation=_echo(r))),
    "echo-everything": _mutated(lambda reply, r: (
        reply.update(id=_echo(r), model=_echo(r), system_fingerprint=_echo(r)),
        reply["choices"][0]["message"].update(content=r.judgment(explanation=_echo(r)))),),
    "markup-metadata": _mutated(lambda reply, r: reply.update(
        id="[/x]", model="[bold \x1b[31m", system_fingerprint="[/]")),
    # bodies that are not a chat completion at all
    "body-not-json": _raw(b"<html><body>502 Bad Gateway</body></html>"),
    "body-empty": _raw(b""),
    "body-array": _raw(b"[1, 2, 3]"),
    "body-string": _raw(b'"a chat completion"'),
    "body-null": _raw(b"null"),
    "body-number": _raw(b"42"),
    "body-invalid-utf8": _raw(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'),
    "body-bom": _raw(lambda r: b"\xef\xbb\xbf" + json.dumps(r.valid()).encode()),
    "body-truncated": _raw(lambda r: json.dumps(r.valid()).encode()[:40]),
    "body-nan": _raw(lambda r: re.sub(r'"prompt_tokens": \d+', '"prompt_tokens": NaN',
                                      json.dumps(r.valid()), count=1).encode()),
    "body-deep": _raw(lambda r: json.dumps(r.valid())[:-1].encode()
                      + b', "x": ' + _deep(100_000).encode() + b"}"),
    "body-deep-choices": _raw(b'{"choices": ' + _deep(100_000).encode() + b"}"),
    "body-event-stream": _raw(lambda r: b"data: " + json.dumps(r.valid()).encode()
                              + b"\n\ndata: [DONE]\n\n", **{"Content-Type": "text/event-stream"}),
    # size: 2 MB and 50 MB replies, a gzip bomb, broken or unknown encodings
    "size-2mb": _big_reply(2_000_000),
    "size-50mb": _big_reply(50_000_000),
    "gzip-bomb": _raw(lambda r: gzip_bomb(), **{"Content-Encoding": "gzip"}),
    "gzip-corrupt": _raw(b"\x1f\x8b\x08\x00garbage-after-the-header",
                         **{"Content-Encoding": "gzip"}),
    "gzip-not-gzip": _raw(lambda r: json.dumps(r.valid()).encode(),
                          **{"Content-Encoding": "gzip"}),
    "gzip-valid": _encoded("gzip", gzip.compress),  # valid: compressed as asked
    "deflate-valid": _encoded("deflate", zlib.compress),  # valid
    "deflate-raw": _encoded("deflate", _raw_deflate),  # valid: raw deflate, as some send it
    "encoding-br": _raw(b"\x0b\x02\x80hello", **{"Content-Encoding": "br"}),
    "encoding-unknown": _raw(lambda r: json.dumps(r.valid()).encode(),
                             **{"Content-Encoding": "x-magic"}),
    "slow-drip": lambda r: HostileReply(200, json.dumps(r.valid()).encode(), drip=0.2),
    # error statuses with hostile bodies or headers (not billed)
    "http-401-echo": lambda r: _json(
        {"error": {"message": f"Incorrect API key provided: {r.token}"}}, 401),
    "http-500-echo": lambda r: _json({"error": {"message": _echo(r)}}, 500),
    "http-500-markup": _raw(b"[/x] \x1b[31m internal [bold error", 500),
    "http-500-deep": _raw(b'{"error": ' + _deep(100_000).encode() + b"}", 500),
    "http-500-huge": _raw(b"e" * 3_000_000, 500),
    "http-429-nan": _first_then_ok(429, **{"retry-after": "nan"}),
    "http-429-inf": _first_then_ok(429, **{"retry-after": "inf"}),
    "http-429-negative": _first_then_ok(429, **{"retry-after": "-30"}),
    "http-429-words": _first_then_ok(429, **{"retry-after": "soon"}),
    "http-429-huge": _first_then_ok(429, **{"retry-after": "1e400"}),
    "ratelimit-reset-nan": lambda r: _json(r.valid(), **{
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "nan"}),
}
"""name → entry (``tests/model/test_hostile.py`` states what the judge must make of each)."""



@contextlib.contextmanager
def fault_server(config: FaultConfig | None = None) -> Iterator[FaultServer]:
    """Fixture helper: a started in-thread server, always stopped afterwards."""
    server = FaultServer(config).start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
