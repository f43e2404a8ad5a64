"""The request guard's parts, in-process: every /v1 route states the scope it needs (so the
guard, which reads it, can never let a route through unchecked), the rate-limit buckets, and
the JSON checks (NaN, Infinity, integers past 64 bits, named by their JSON path)."""

from __future__ import annotations

import time

import pytest

from judge.service import build_settings, create_app
from judge.service.http._guard import RateLimit, api_routes, json_problem
from judge.web import mount_web


def test_every_v1_route_has_a_scope_the_guard_reads(tmp_path):
    app = create_app(build_settings({"data_dir": tmp_path, "job_slots": 0}))
    mount_web(app)
    routes = api_routes(app)
    assert len(routes) >= 25
    missing = [f"{sorted(r.route.methods)} {r.route.path}" for r in routes if r.scope is None]
    assert missing == []
    assert {r.scope for r in routes} == {"read", "submit", "review", "admin"}
    by_path = {(r.route.path, m): r for r in routes for m in r.route.methods}
    assert by_path[("/v1/tokens", "POST")].scope == "admin"
    assert by_path[("/v1/labels", "PUT")].scope == "review"
    assert by_path[("/v1/files", "POST")].scope == "submit"
    assert ("query", "offset") in by_path[("/v1/jobs", "GET")].int_params
    assert ("path", "label_id") in by_path[("/v1/labels/{label_id}", "DELETE")].int_params


def test_a_bucket_allows_its_rate_then_says_how_long_to_wait(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    limit = RateLimit(60)  # one a second, 60 at once
    assert all(limit.take("a") == 0 for _ in range(60))
    assert limit.take("a") == pytest.approx(1.0)
    assert limit.take("b") == 0  # keys are apart
    clock[0] += 2.5
    assert limit.take("a") == 0 and limit.take("a") == 0 and limit.take("a") > 0
    assert limit.wait("a") > 0 and limit.wait("c") == 0
    assert RateLimit(0).take("a") == 0  # 0: no limit


def test_the_bucket_forgets_the_oldest_keys_beyond_its_size():
    limit = RateLimit(1, max_keys=3)
    for key in "abcd":
        limit.take(key)
    assert limit.wait("a") == 0 and limit.wait("d") > 0


@pytest.mark.parametrize(("body", "field"), [
    (b'{"a": NaN}', "a"),
    (b'{"a": {"b": [1, Infinity]}}', "a.b[1]"),
    (b'[-Infinity]', "[0]"),
    (b'{"n": 9223372036854775808}', "n"),
    (b'{"n": -9223372036854775809}', "n"),
    (b'{"x": 1e999}', "x"),
])
def test_json_problems_name_their_field(body, field):
    problem = json_problem(body)
    assert problem is not None and problem[1] == field


@pytest.mark.parametrize("body", [
    b'{"n": 9223372036854775807, "x": 1.5e300, "s": "NaN"}', b"not json at all", b"[]",
])
def test_fine_or_foreign_json_is_left_to_the_route(body):
    assert json_problem(body) is None


def test_json_nested_past_the_limit_is_refused():
    problem = json_problem(b"[" * 1000 + b"]" * 1000)
    assert problem is not None and "nested" in problem[0]


def _client(app, base: str = "http://testserver"):
    import httpx

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


def test_an_escaped_error_is_one_log_line_a_500_with_its_id_and_a_closed_connection(
        tmp_path, caplog):
    import asyncio
    import logging

    app = create_app(build_settings({"data_dir": tmp_path, "job_slots": 0}))

    @app.get("/v1/boom")
    def boom() -> None:  # a bug no handler expected
        raise RuntimeError("kaputt\nsecond line")

    async def ask():
        async with _client(app) as client:
            return await client.get("/v1/boom", headers={"X-Request-ID": "req-7"})

    service = app.state.service
    service.start()
    try:
        from judge.service import create_token
        token = create_token(service.db, "lab", "read", name="r")[0]

        async def ask_with_token():
            async with _client(app) as client:
                return await client.get("/v1/boom", headers={"X-Request-ID": "req-7",
                                                             "Authorization": f"Bearer {token}"})

        caplog.set_level(logging.WARNING)
        unauthenticated = asyncio.run(ask())
        response = asyncio.run(ask_with_token())
    finally:
        service.stop()
    assert unauthenticated.status_code == 401  # the guard asks for a token first
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-7"
    assert response.headers["connection"] == "close"
    assert "req-7" in response.json()["error"]["message"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "req-7" in errors[0].getMessage()
    assert "\n" not in errors[0].getMessage() and errors[0].exc_info is None
    assert "kaputt" not in response.text  # the client learns the id, not the internals


def test_hsts_only_over_https(tmp_path):
    import asyncio

    app = create_app(build_settings({"data_dir": tmp_path, "job_slots": 0}))

    async def ask(base: str):
        async with _client(app, base) as client:
            return await client.get("/v1/me")

    plain, secure = asyncio.run(ask("http://testserver")), asyncio.run(ask("https://testserver"))
    assert plain.status_code == secure.status_code == 401
    assert "strict-transport-security" not in plain.headers
    assert secure.headers["strict-transport-security"].startswith("max-age=")
