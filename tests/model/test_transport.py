"""The call site's transports: aiohttp by default, httpx for given clients; both report
timeouts, refused connections and HTTP errors as model errors, never as replies."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

import judge
from judge import ModelError
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
def test_an_unreplayed_request_to_the_default_endpoint_never_leaves_the_machine(backend):
    """No respx, no cassette: the test suite's guard refuses the connection to
    api.openai.com, and the judge reports it as an error rather than an answer."""
    config = judge.load_config({"model": "m", "use_cache": False, "max_retries": 0,
                                "http_backend": backend, "api_key": "sk-test"})
    assert config.endpoint == "https://api.openai.com/v1"
    BLOCKED.clear()
    with pytest.raises(ModelError, match=r"^connection error: "):
        _complete(ModelClient(config))
    assert BLOCKED == ["api.openai.com"]
