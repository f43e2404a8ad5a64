"""The judge against a real HTTP server that injects faults (tests/fault_server.py).

respx fixtures (test_client.py) show single behaviours; here many faults are mixed in one
concurrent run over real sockets, and the server's own counts are the ground truth for the
client's bookkeeping: nothing lost, nothing repeated, errors never verdicts.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import judge
import judge.model._client as client_module
from judge.pipeline import plan_evaluation

from ..fault_server import (
    INVALID_TEXT,
    PERMANENT,
    TRANSIENT,
    Decider,
    FaultConfig,
    FaultServer,
    ServerProcess,
    Stats,
    body_hash,
    get_json,
    post_json,
    replicate_examples,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MIXED = {"http_429": 0.08, "http_500": 0.06, "http_503": 0.06, "timeout": 0.05, "drop": 0.06,
         "malformed": 0.05, "truncated": 0.05, "refusal": 0.05, "invalid": 0.05,
         "invalid_once": 0.08}
COPIES = 8
TRANSIENT_ATTEMPTS = 2
"""Up to two transient faults in a row per request; the client gets as many retries."""
CLIENT_TIMEOUT = 0.6
"""60 times the server's 10 ms latency: only injected timeouts ever time out."""
TRANSPORT_WORDS = ("HTTP ", "timed out", "connection error")
Data = tuple[Any, Any, Any]


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny backoff; and no proxy may sit between the client and 127.0.0.1."""
    monkeypatch.setattr(client_module, "BACKOFF_INITIAL", 0.001)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def start_server() -> Iterator[Callable[[FaultConfig], FaultServer]]:
    """Start in-thread servers; every one is stopped when the test ends, pass or fail."""
    servers: list[FaultServer] = []

    def start(config: FaultConfig) -> FaultServer:
        servers.append(FaultServer(config).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def _load(schema: Path, dialogues: Path, predictions: Path) -> Data:
    s = judge.load_schema(schema)
    d = judge.load_dialogues(dialogues)
    return s, d, judge.load_predictions(predictions, d, s)


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Data:
    """Tagged copies of the examples: 88 turns, every request body distinct."""
    return _load(*replicate_examples(EXAMPLES, tmp_path_factory.mktemp("copies"), COPIES))


@pytest.fixture
def two_turns() -> Data:
    schema, dialogues, predictions = _load(EXAMPLES / "schema.json",
                                           EXAMPLES / "dialogues.jsonl",
                                           EXAMPLES / "predictions.jsonl")
    return schema, dialogues.subset(["EX002.json"]), predictions


def _config(server: FaultServer, tmp_path: Path, **values: Any) -> Any:
    """The production transport (aiohttp) against the real local fault server."""
    return judge.load_config({"model": "fault-model", "base_url": server.url,
                              "use_cache": False, "cache_dir": str(tmp_path / "cache"),
                              "timeout": CLIENT_TIMEOUT, "http_backend": "aiohttp", **values})


def _planned(config: Any, data: Data) -> dict[str, str]:
    """custom_id → body hash of every call that must reach the server."""
    plan = plan_evaluation(config, *data)
    return {call.custom_id: body_hash(call.body) for call in plan.calls}


EXPECTED_ERROR = {"malformed": "model error: the server's reply is not JSON",
                  "truncated": "truncated:", "refusal": "refused:",
                  "invalid": "invalid output after 2 attempt(s)"}
ATTEMPTS = {"ok": 1, "invalid_once": 2, "invalid": 2, "refusal": 1, "truncated": 1,
            "malformed": 0}


def test_mixed_faults_every_call_accounted_for(tmp_path, start_server, copies):
    server = start_server(FaultConfig(latency=0.01, rates=MIXED, seed=11,
                                      transient_attempts=TRANSIENT_ATTEMPTS, retry_after=0.0,
                                      hang=2 * CLIENT_TIMEOUT))
    config = _config(server, tmp_path, max_retries=TRANSIENT_ATTEMPTS, reasks=1, concurrency=8)
    planned = _planned(config, copies)
    assert len(set(planned.values())) == len(planned), "precondition: distinct bodies"

    result = judge.evaluate(config, *copies)
    stats = server.snapshot()
    summary, bodies = result.summary, stats["bodies"]
    reasks_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in bodies.values():
        if entry["root"]:
            reasks_of[entry["root"]].append(entry)

    # the mix really happened (the seed is fixed; should a prompt change move the draws, 170+
    # calls leave a kind out with a probability of about 1e-3)
    for kind in MIXED:
        assert stats["by_kind"][kind] >= 1, f"no {kind} fault was injected"

    failing = 0
    for row in result.rows:
        assert sorted(c["dimension"] for c in row["calls"]) == ["accuracy", "completeness"]
        row_errors = []
        for call in row["calls"]:
            if call["skipped"]:
                assert call["results"] == {"incorrect_domain_slot": {}}
                continue
            key = planned.pop(call["custom_id"])
            entry = bodies[key]  # every planned call reached the server
            kinds = entry["kinds"]
            # transient faults come first, are bounded by the retries, and end in an answer
            assert entry["received"] == len(kinds) <= TRANSIENT_ATTEMPTS + 1
            assert all(k in TRANSIENT for k in kinds[:-1]) and kinds[-1] not in TRANSIENT
            terminal = kinds[-1]
            assert len(call["attempts"]) == ATTEMPTS[terminal], (terminal, call)
            reasked = reasks_of.get(key, [])
            if terminal in ("invalid", "invalid_once"):
                assert len(reasked) == 1
                assert reasked[0]["kinds"][-1] == ("invalid" if terminal == "invalid" else "ok")
                assert call["attempts"][0]["text"] == INVALID_TEXT
            else:
                assert not reasked
            if terminal in EXPECTED_ERROR:
                failing += 1
                assert call["error"] and call["error"].startswith(EXPECTED_ERROR[terminal])
                assert call["results"] is None
                row_errors.append(call["error"])
            else:
                assert call["error"] is None and call["results"] is not None
            assert call["error"] is None or not any(w in call["error"] for w in TRANSPORT_WORDS)
        # errors are never verdicts; a turn without errors always has one
        if row_errors:
            assert row["verdict"] is None
            assert all(e in row["error"] for e in row_errors)
        else:
            assert row["error"] is None and isinstance(row["verdict"], bool)
    assert not planned, f"planned calls that never reached the server: {sorted(planned)}"

    calls = summary["calls"]
    assert calls["sent"] == stats["total"]  # every HTTP attempt the client made arrived
    assert calls["retries"] == stats["transient"]  # each transient fault cost one retry
    assert calls["planned"] == stats["roots"]
    assert calls["reasks"] == stats["reasks_completed"] == stats["reask_requests"] - sum(
        k in TRANSIENT for e in bodies.values() if e["root"] for k in e["kinds"])
    assert calls["failed"] == failing
    assert calls["cache_hits"] == calls["answered_from_cache"] == 0
    assert sum(len(c["attempts"]) for r in result.rows for c in r["calls"]) == stats["completed"]
    assert stats["max_completed_per_body"] == 1  # no completed call was ever sent again
    assert stats["other"] == 0
    assert summary["tokens"] == stats["tokens"]
    errors = [r for r in result.rows if r["error"]]
    assert summary["error_turns"] == len(errors) == summary["errors"]["count"] > 0
    assert summary["scored_turns"] + summary["error_turns"] == summary["turns"] == 11 * COPIES
    # the HTTP view of the counts is the Python one (but for the server's CPU clock)
    over_http, direct = get_json(server.port, "/stats"), server.snapshot()
    assert over_http.pop("process_cpu_s") <= direct.pop("process_cpu_s")
    assert over_http == direct


def test_exhausted_retries_become_error_rows(tmp_path, start_server, two_turns):
    server = start_server(FaultConfig(
        rates={"http_500": 0.3, "http_503": 0.3, "drop": 0.2, "timeout": 0.2},
        transient_attempts=100, hang=1.0))
    config = _config(server, tmp_path, max_retries=1, timeout=0.3, concurrency=4)
    planned = _planned(config, two_turns)
    result = judge.evaluate(config, *two_turns)
    stats = server.snapshot()
    assert stats["total"] == result.summary["calls"]["sent"] == 2 * len(planned)
    assert stats["completed"] == 0
    assert result.summary["error_turns"] == result.summary["turns"] == 2
    assert result.summary["scored_turns"] == 0 and result.summary["tsa"] is None
    for row in result.rows:
        assert row["verdict"] is None and row["jga"] is None
        for call in row["calls"]:
            assert call["error"].startswith("model error:")
            assert any(w in call["error"] for w in TRANSPORT_WORDS)


def test_retries_count_only_retries_that_happen(tmp_path, start_server, two_turns):
    server = start_server(FaultConfig(rates={"http_503": 1.0}, transient_attempts=100))
    config = _config(server, tmp_path, max_retries=1, concurrency=4)
    planned = _planned(config, two_turns)
    result = judge.evaluate(config, *two_turns)
    assert server.snapshot()["total"] == 2 * len(planned)
    assert result.summary["calls"]["retries"] == len(planned)  # one retry per call


def test_retry_after_is_honoured_instead_of_backoff(tmp_path, start_server, two_turns,
                                                    monkeypatch):
    monkeypatch.setattr(client_module, "BACKOFF_INITIAL", 5.0)  # would take >= 5 s if used
    server = start_server(FaultConfig(rates={"http_429": 1.0}, retry_after=0.25))
    config = _config(server, tmp_path, max_retries=1, concurrency=4)
    planned = _planned(config, two_turns)
    start = time.perf_counter()
    result = judge.evaluate(config, *two_turns)
    elapsed = time.perf_counter() - start
    assert 0.25 <= elapsed < 2.5
    assert result.summary["error_turns"] == 0
    assert result.summary["calls"]["sent"] == server.snapshot()["total"] == 2 * len(planned)
    assert server.snapshot()["by_kind"]["http_429"] == len(planned)


def test_faults_are_reproducible_and_transient_ones_clear():
    config = FaultConfig(rates={"http_503": 0.5, "drop": 0.3, "invalid": 0.4,
                                "invalid_once": 0.3}, seed=5, transient_attempts=2)
    bodies = [{"model": "m", "messages": [{"role": "system", "content": '"missed_domain_slot"'},
                                          {"role": "user", "content": f"turn {i}"}]}
              for i in range(200)]

    def run(seed_config: FaultConfig) -> list[str]:
        decider = Decider(seed_config, Stats())
        return [decider.decide(b).kind for b in bodies for _ in range(3)]

    first = run(config)
    assert first == run(config)  # same seed, same faults, whatever the arrival order
    assert first != run(dataclasses.replace(config, seed=6))
    for i in range(200):
        kinds = first[3 * i:3 * i + 3]
        assert kinds[2] not in TRANSIENT  # attempts beyond transient_attempts never fail so
    # a re-ask of an "invalid" root is invalid again; of an "invalid_once" root it is answered
    decider = Decider(config, Stats())
    seen = set()
    for body in bodies:
        root_kind = decider.decide(body).kind
        if root_kind not in ("invalid", "invalid_once"):
            continue
        reask = {**body, "messages": [*body["messages"],
                                      {"role": "assistant", "content": INVALID_TEXT},
                                      {"role": "user", "content": "again"}]}
        kinds = [decider.decide(reask).kind for _ in range(3)]
        final = next(k for k in kinds if k not in TRANSIENT)
        assert final == ("invalid" if root_kind == "invalid" else "ok")
        seen.add(root_kind)
    assert seen == {"invalid", "invalid_once"}
    with pytest.raises(ValueError, match="sum to more than 1"):
        FaultConfig(rates={"http_429": 0.7, "drop": 0.5})
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultConfig(rates={"gremlins": 0.1})
    assert set(PERMANENT) | set(TRANSIENT) == set(MIXED)


def test_subprocess_server_serves_counts_and_stops():
    body = {"model": "m", "messages": [{"role": "system", "content": '"incorrect_domain_slot"'},
                                       {"role": "user", "content": "hello"}]}
    server = ServerProcess(FaultConfig(rates={"http_503": 1.0}, transient_attempts=1),
                           max_seconds=60)
    with server:
        assert server.url.startswith("http://127.0.0.1:")
        assert post_json(server.port, "/v1/chat/completions", body)[0] == 503
        status, reply = post_json(server.port, "/v1/chat/completions", body)
        assert status == 200 and b"incorrect_domain_slot" in reply
        other = {**body, "messages": [*body["messages"], {"role": "user", "content": "again"}]}
        assert post_json(server.port, "/v1/chat/completions", other)[0] == 503
        stats = server.snapshot()
        assert stats["total"] == 3 and stats["by_kind"]["http_503"] == 2
        assert stats["bodies"][body_hash(body)]["kinds"] == ["http_503", "ok"]
        assert "timeline" not in stats
        timeline = server.snapshot(bodies=False, timeline=True)["timeline"]
        # by arrival, which is the order they were sent (rows are recorded once a reply is
        # written, by its own thread: under load, out of order)
        assert [row[0] for row in timeline] == [body_hash(body)] * 2 + [body_hash(other)]
        assert all(arrived <= replied for _, arrived, replied in timeline)
        process = server.process
    assert process is not None and process.returncode == 0  # stopped on stdin EOF


def test_an_answer_ready_after_its_client_gave_up_is_not_billed():
    """The server bills an answer when it sends it to a client still waiting. One whose
    client has closed the connection first (its timeout) is ``abandoned``: the client saw no
    reply, so asking again is right and must not count as paying twice (issue 36, item 13)."""
    import socket

    body = {"model": "m", "messages": [{"role": "system", "content": '"missed_domain_slot"'},
                                       {"role": "user", "content": "given up"}]}
    raw = json.dumps(body).encode()
    with FaultServer(FaultConfig(latency=0.5)) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(raw), raw))
            time.sleep(0.1)  # the request arrived; the answer takes 0.5 s: give up first
        deadline = time.monotonic() + 30
        while server.snapshot(bodies=False)["by_kind"]["abandoned"] == 0:
            assert time.monotonic() < deadline, server.snapshot()
            time.sleep(0.02)
        assert post_json(server.port, "/v1/chat/completions", body, timeout=30)[0] == 200
        stats = server.snapshot()
    assert stats["bodies"][body_hash(body)] == {"received": 2, "completed": 1, "root": None,
                                                "kinds": ["abandoned", "ok"]}
    assert stats["completed"] == 1 and stats["answered"] == 1


def test_held_batches_stay_in_progress_until_released():
    """``POST /batches-held`` keeps a batch in progress past its ``batch_seconds`` (the
    kill -9 batch test releases them once the replica it kills is gone)."""
    import httpx

    line = {"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
    with FaultServer(FaultConfig(batch_seconds=0.0)) as server:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=base, trust_env=False, timeout=10) as http:
            assert http.post("/batches-held", json={"held": True}).json() == {"held": True}
            uploaded = http.post("/v1/files", files={"file": ("r.jsonl", json.dumps(line))},
                                 data={"purpose": "batch"}).json()
            batch = http.post("/v1/batches", json={"input_file_id": uploaded["id"],
                                                    "endpoint": "/v1/chat/completions",
                                                    "completion_window": "24h"}).json()
            assert batch["status"] == "in_progress" and batch["output_file_id"] is None
            time.sleep(0.05)
            assert http.get(f"/v1/batches/{batch['id']}").json()["status"] == "in_progress"
            assert http.post("/batches-held", json={"held": False}).json() == {"held": False}
            done = http.get(f"/v1/batches/{batch['id']}").json()
    assert done["status"] == "completed" and done["request_counts"]["completed"] == 1
