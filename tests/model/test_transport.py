"""The call site's transports: aiohttp by default, httpx for given clients; both report
timeouts, refused connections and HTTP errors as model errors, never as replies."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

import judge
import judge.errors
from judge.errors import ModelError
from judge.model import ModelClient
from judge.model._transport import AiohttpTransport, HttpxTransport, env_proxy

from ..conftest import BLOCKED
from ..fault_server import FaultConfig, FaultServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _config(base_url: str, **values):
    return judge.load_config({"model": "m", "base_url": base_url, "use_cache": False,
                              "max_retries": 0, **values})


def _complete(client: ModelClient):
    async def run():
        try:
            return await client.complete(BODY, template_hash="t")
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_aiohttp_is_the_default_backend_outside_the_tests(monkeypatch):
    monkeypatch.delenv("DST_JUDGE_HTTP_BACKEND")
    config = _config("http://127.0.0.1:1/v1")
    assert config.http_backend == "aiohttp"
    assert isinstance(ModelClient(config)._transport, AiohttpTransport)
    given = ModelClient(config, http_client=httpx.AsyncClient())
    assert isinstance(given._transport, HttpxTransport)  # a given client always wins


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_refused_connection_is_a_connection_error(backend):
    config = _config(f"http://127.0.0.1:{_closed_port()}/v1", http_backend=backend)
    with pytest.raises(ModelError, match=r"^connection error: ") as info:
        _complete(ModelClient(config))
    assert not info.value.fatal


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_a_hanging_server_is_a_timeout(backend):
    with FaultServer(FaultConfig(rates={"timeout": 1.0}, transient_attempts=5, hang=2.0)) as srv:
        config = _config(srv.url, http_backend=backend, timeout=0.2)
        with pytest.raises(ModelError, match=r"^the request timed out$"):
            _complete(ModelClient(config))


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_answers_arrive_with_usage_over_both_backends(backend):
    with FaultServer(FaultConfig()) as srv:
        completion = _complete(ModelClient(_config(srv.url, http_backend=backend)))
    assert completion.finish_reason == "stop"
    assert completion.usage["prompt_tokens"] > 0
    assert json.loads(completion.text) is not None


def _fixture_client(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(("response", "message", "fatal"), [
    (httpx.Response(401, json={"error": {"message": "bad key"}}), "HTTP 401: bad key", True),
    (httpx.Response(404, text="no such model"), "HTTP 404: no such model", True),
    (httpx.Response(503, content=b""), "HTTP 503: (empty body)", False),
    (httpx.Response(400, json={"error": "context too long"}), "HTTP 400: context too long",
     False),
    (httpx.Response(200, text="<html>"), "the server's reply is not JSON", False),
    (httpx.Response(200, json=[1, 2]), "the server's reply is not a chat completion", False),
])
def test_bad_responses_become_model_errors(response, message, fatal):
    """Fixture responses (hand-written): each becomes an error naming what the server said."""
    client = ModelClient(_config("http://fixture/v1"),
                         http_client=_fixture_client(lambda request: response))
    with pytest.raises(ModelError) as info:
        _complete(client)
    assert str(info.value).startswith(message)
    assert info.value.fatal is fatal


def test_request_carries_json_body_and_key_and_org_headers_only_when_set():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "{}"},
                                                      "finish_reason": "stop"}]})

    keyed = judge.load_config({"model": "m", "base_url": "http://fixture/v1",
                               "api_key": "sk-test", "use_cache": False,
                               "organization": "org-1", "project": "proj-1"})
    _complete(ModelClient(keyed, http_client=_fixture_client(handler)))
    _complete(ModelClient(_config("http://fixture/v1"), http_client=_fixture_client(handler)))
    assert [str(r.url) for r in seen] == ["http://fixture/v1/chat/completions"] * 2
    assert json.loads(seen[0].content) == BODY
    assert seen[0].headers["content-type"] == "application/json"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert seen[0].headers["openai-organization"] == "org-1"
    assert seen[0].headers["openai-project"] == "proj-1"
    assert "authorization" not in seen[1].headers
    assert "openai-organization" not in seen[1].headers


def test_proxy_from_the_environment_is_read_like_httpx_does(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https", "api.openai.com") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,.corp.example")
    assert env_proxy("https", "api.openai.com") == "http://proxy.internal:3128"
    assert env_proxy("http", "api.openai.com") is None  # no HTTP_PROXY set
    assert env_proxy("http", "127.0.0.1") is None
    assert env_proxy("https", "llm.corp.example") is None


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_a_request_beyond_the_loopback_never_leaves_the_machine(backend):
    """No respx, no cassette, a remote host: the test suite's guard refuses the connection
    (over either backend), and the judge reports it as an error rather than an answer.
    (Requests to api.openai.com are all replayed from cassettes: the run fails when one
    reaches this guard; see tests/conftest.py.)"""
    config = judge.load_config({"model": "m", "use_cache": False, "max_retries": 0,
                                "http_backend": backend, "api_key": "sk-test",
                                "base_url": "https://judge.example.test/v1"})
    BLOCKED.clear()
    with pytest.raises(ModelError, match=r"^connection error: "):
        _complete(ModelClient(config))
    assert BLOCKED == ["judge.example.test"]


# --- size caps while reading -------------------------------------------------------------------

def _feed(encoding, data: bytes, *, limit: int = 1_000_000, step: int = 65536):
    from judge.model._transport import CappedBody

    body = CappedBody(encoding, limit)
    for start in range(0, len(data), step):
        if not body.feed(data[start:start + step]):
            break
    return body


@pytest.mark.parametrize("step", [1, 7, 65536])
def test_capped_body_decodes_gzip_and_deflate_in_any_chunking(step):
    import gzip
    import zlib

    payload = json.dumps({"x": "y" * 500}).encode()
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw_deflate = packer.compress(payload) + packer.flush()
    for encoding, packed in (("gzip", gzip.compress(payload)), ("x-gzip", gzip.compress(payload)),
                             ("deflate", zlib.compress(payload)), ("deflate", raw_deflate),
                             ("gzip", gzip.compress(payload[:100]) + gzip.compress(payload[100:])),
                             (None, payload), ("identity", payload)):
        body = _feed(encoding, packed, step=step)
        assert body.defect is None and body.content == payload, encoding


def test_a_gzip_bomb_stops_at_the_cap_without_inflating():
    from ..fault_server import gzip_bomb

    bomb = gzip_bomb(100)  # 100 MB of zeros in about 100 KB
    body = _feed("gzip", bomb)
    assert "max_reply_bytes" in body.defect
    assert len(body.content) == 1_000_001  # one byte past the cap shows it was cut
    assert body.received < len(bomb)  # reading stopped early


def test_caps_count_received_and_decompressed_bytes():
    import gzip
    import os

    noise = os.urandom(300_000)  # does not compress: the received count trips first
    assert "compressed" in _feed("gzip", gzip.compress(noise), limit=200_000).defect
    assert "max_reply_bytes" in _feed(None, b"x" * 200_001, limit=200_000).defect
    assert _feed(None, b"x" * 200_000, limit=200_000).defect is None


@pytest.mark.parametrize(("encoding", "data", "reason"), [
    ("br", b"xx", "unsupported content-encoding"),
    ("gzip, br", b"xx", "unsupported content-encoding"),
    ("gzip", b"not gzip at all", "corrupt"),
    ("deflate", b"\x78\x9c garbage", "corrupt"),
])
def test_unknown_or_broken_encodings_are_defects(encoding, data, reason):
    assert reason in _feed(encoding, data).defect


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_a_reply_over_the_cap_is_a_model_error_and_not_retried(backend):
    with FaultServer() as srv:
        base = f"{srv.url.removesuffix('/v1')}/hostile/size-2mb/v1"
        client = ModelClient(_config(base, http_backend=backend, max_retries=3))
        with pytest.raises(ModelError, match="max_reply_bytes"):
            _complete(client)
        assert srv.snapshot()["total"] == 1  # paid once, never asked again


@pytest.mark.parametrize("backend", ["aiohttp", "httpx"])
def test_a_reply_cut_by_the_timeout_after_its_status_line_is_paid_and_not_retried(backend):
    """The server answered (status line and headers), then its body trickled past the
    timeout: that reply was paid for, so sending the request again would pay twice. It is an
    error row saying where it stopped; only a request with no status line at all is retried."""
    with FaultServer() as srv:
        base = f"{srv.url.removesuffix('/v1')}/hostile/slow-drip/v1"
        client = ModelClient(_config(base, http_backend=backend, max_retries=3, timeout=0.6))
        with pytest.raises(ModelError, match=r"cut off after \d+ bytes: timed out") as info:
            _complete(client)
        assert isinstance(info.value, judge.errors.ReplyError)
        assert srv.snapshot()["total"] == 1  # paid once, never asked again


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "soon", "1e400", ""])
def test_server_delays_that_are_not_finite_numbers_are_ignored(value):
    from judge.model._http_status import _seconds, parse_reset

    assert _seconds(value) in (None, 0.0)
    assert parse_reset(value) is None or parse_reset(value) >= 0
    assert _seconds("3") == 3.0 and _seconds("1000") == 120.0


def test_a_shared_transport_outlives_the_clients_that_use_it():
    """The service's workers keep one pool of connections per endpoint across jobs: a client
    given a transport uses it and leaves it open; one without opens and closes its own."""
    with FaultServer(FaultConfig()) as srv:
        config = _config(srv.url, http_backend="aiohttp")
        shared = AiohttpTransport(timeout=5, connections=0)

        async def run():
            sessions = []
            for _ in range(2):
                client = ModelClient(config, transport=shared)
                try:
                    completion = await client.complete(BODY, template_hash="t")
                finally:
                    await client.aclose()
                assert completion.finish_reason == "stop"
                assert shared._session is not None and not shared._session.closed
                sessions.append(shared._session)
            own = ModelClient(config)
            await own.complete(BODY, template_hash="t")
            mine = own._transport._session
            await own.aclose()
            await shared.aclose()
            return sessions, mine

        sessions, mine = asyncio.run(run())
    assert sessions[0] is sessions[1]  # the second client reused the first one's pool
    assert mine is not None and mine.closed  # a client's own transport closes with it
    assert shared._session is None
