"""Transport behaviour of the one model call site, against hand-written fixture responses
(these are fixtures, not recordings: a real server does not fail on demand)."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

import judge.model._client as client_module
from judge import evaluate, load_config
from judge.errors import ModelError

URL = "http://127.0.0.1:8999/v1/chat/completions"


def fixture_reply(content: str | None, finish_reason: str = "stop",
                  refusal: str | None = None) -> httpx.Response:
    """A hand-written chat.completion response (fixture)."""
    return httpx.Response(200, json={
        "id": "fixture", "model": "fixture-model",
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                  "prompt_tokens_details": {"cached_tokens": 4}}})


VALID = {"accuracy": '{"explanation": "ok", "incorrect_domain_slot": {}}',
         "completeness": '{"explanation": "ok", "missed_domain_slot": {}}'}


def _dimension(request: httpx.Request) -> str:
    system = json.loads(request.content)["messages"][0]["content"]
    return "completeness" if '"missed_domain_slot"' in system else "accuracy"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(client_module, "BACKOFF_INITIAL", 0.001)


@pytest.fixture
def one_turn(example_data):
    schema, dialogues, predictions = example_data
    return schema, dialogues.subset(["EX002.json"]), predictions  # 2 turns


def _config(tmp_path, **values):
    return load_config({"model": "m", "base_url": "http://127.0.0.1:8999/v1",
                        "use_cache": False, "cache_dir": str(tmp_path), **values})


def _evaluate(config, data, handler):
    schema, dialogues, predictions = data
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(URL).mock(side_effect=handler)
        result = evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient())
    return route, result


def test_429_with_retry_after_then_success(tmp_path, one_turn):
    seen = {"n": 0}

    def handler(request):
        seen["n"] += 1
        if seen["n"] == 1:
            return httpx.Response(429, headers={"retry-after": "0"},
                                  json={"error": {"message": "slow down"}})
        return fixture_reply(VALID[_dimension(request)])

    _, result = _evaluate(_config(tmp_path, concurrency=1), one_turn, handler)
    assert result.summary["calls"]["retries"] == 1
    assert result.summary["error_turns"] == 0
    assert result.summary["tokens"]["cached_prompt_tokens"] == 4 * 4


def test_server_errors_exhaust_retries_into_error_rows(tmp_path, one_turn):
    def busy(request):
        return httpx.Response(503, json={"error": {"message": "busy"}})

    route, result = _evaluate(_config(tmp_path, max_retries=2), one_turn, busy)
    assert route.call_count == 4 * 3  # 4 calls, each tried 1 + 2 times
    assert result.summary["scored_turns"] == 0 and result.summary["error_turns"] == 2
    assert all("HTTP 503: busy" in row["error"] for row in result.rows)
    assert all(row["verdict"] is None for row in result.rows)


def test_timeouts_and_dropped_connections_are_retried(tmp_path, one_turn):
    failures = [httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("dropped")]

    def handler(request):
        if failures:
            raise failures.pop(0)
        return fixture_reply(VALID[_dimension(request)])

    _, result = _evaluate(_config(tmp_path, concurrency=1), one_turn, handler)
    assert result.summary["error_turns"] == 0 and result.summary["calls"]["retries"] == 2


def test_authentication_error_stops_the_run(tmp_path, one_turn):
    with pytest.raises(ModelError, match="HTTP 401") as err:
        _evaluate(_config(tmp_path), one_turn,
                  lambda r: httpx.Response(401, json={"error": {"message": "bad key"}}))
    assert err.value.fatal


def test_refusal_and_truncation_are_errors_not_verdicts(tmp_path, one_turn):
    def handler(request):
        if _dimension(request) == "accuracy":
            return fixture_reply(None, refusal="I can't help with that")
        return fixture_reply('{"explanation": "cut', finish_reason="length")

    _, result = _evaluate(_config(tmp_path), one_turn, handler)
    for row in result.rows:
        assert row["verdict"] is None
        assert "refused" in row["error"] and "truncated" in row["error"]


def test_invalid_reply_is_re_asked_with_the_validation_error(tmp_path, one_turn):
    bodies = []

    def handler(request):
        body = json.loads(request.content)
        bodies.append(body)
        if len(body["messages"]) > 2 or _dimension(request) == "completeness":
            return fixture_reply(VALID[_dimension(request)])
        return fixture_reply("The state looks right to me.")  # no JSON at all

    _, result = _evaluate(_config(tmp_path, concurrency=1), one_turn, handler)
    reasks = [b for b in bodies if len(b["messages"]) > 2]
    assert len(reasks) == 2  # one per accuracy call
    assert reasks[0]["messages"][-2] == {"role": "assistant",
                                         "content": "The state looks right to me."}
    assert "not valid JSON" in reasks[0]["messages"][-1]["content"]
    assert result.summary["calls"]["reasks"] == 2 and result.summary["error_turns"] == 0


def test_still_invalid_after_reasks_is_an_error_row(tmp_path, one_turn):
    def handler(request):
        if _dimension(request) == "completeness":
            return fixture_reply(VALID["completeness"])
        return fixture_reply('{"explanation": "x"}')

    _, result = _evaluate(_config(tmp_path, reasks=2), one_turn, handler)
    for row in result.rows:
        assert row["verdict"] is None
        assert "invalid output after 3 attempt(s)" in row["error"]
        accuracy = next(c for c in row["calls"] if c["dimension"] == "accuracy")
        assert len(accuracy["attempts"]) == 3


def test_rate_limit_headers_pause_every_call_until_reset(tmp_path, one_turn):
    import time

    stamps = []

    def handler(request):
        stamps.append(time.monotonic())
        reply = fixture_reply(VALID[_dimension(request)])
        if len(stamps) == 1:
            reply.headers["x-ratelimit-remaining-requests"] = "0"
            reply.headers["x-ratelimit-reset-requests"] = "300ms"
        return reply

    _, result = _evaluate(_config(tmp_path, concurrency=1), one_turn, handler)
    assert result.summary["error_turns"] == 0
    assert stamps[1] - stamps[0] >= 0.29  # the second call waited for the reset


def test_rpm_and_tpm_limiters_gate_every_request(tmp_path, one_turn, monkeypatch):
    acquired = []

    class RecordingLimiter:
        def __init__(self, rate, period):
            self.rate, self.period = rate, period

        async def acquire(self, amount=1):
            acquired.append((self.rate, amount))

    monkeypatch.setattr(client_module, "AsyncLimiter", RecordingLimiter)
    _evaluate(_config(tmp_path, rpm=120, tpm=50_000), one_turn,
              lambda request: fixture_reply(VALID[_dimension(request)]))
    rpm = [a for rate, a in acquired if rate == 120]
    tpm = [a for rate, a in acquired if rate == 50_000]
    assert rpm == [1, 1, 1, 1]  # one permit per request
    assert len(tpm) == 4 and all(a > 1024 for a in tpm)  # prompt estimate + max_tokens


def test_parse_reset_durations():
    assert client_module.parse_reset("1s") == 1.0
    assert client_module.parse_reset("6m0s") == 360.0
    assert client_module.parse_reset("20ms") == pytest.approx(0.02)
    assert client_module.parse_reset("0.5") == 0.5
    assert client_module.parse_reset("soon") is None
