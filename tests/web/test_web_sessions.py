"""Sessions of the web interface, in-process: two apps (two replicas) on one database, logging
out on one ends the session on both (issue 36, item 2); wrong tokens at the login form meet
the per-address failure limit and a valid token still logs in (items 3, 4); the log filter
blanks every secret a line could carry (item 8)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.service import build_settings, create_app, create_token
from judge.service.auth._logs import REDACTED, RedactSecrets, redact
from judge.web import mount_web

from .conftest import Browserless, csrf_of


@pytest.fixture
def two_replicas(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two apps (as two replicas) on one data directory: one database, one session key."""
    settings = build_settings({"data_dir": tmp_path / "data", "job_slots": 0,
                               "auth_failures_per_minute": 3, "requests_per_minute": 0})
    apps = []
    for _ in range(2):
        app = create_app(settings)
        mount_web(app)
        app.state.service.start()
        apps.append(app)
    service = apps[0].state.service
    tokens = {"alice": create_token(service.db, "lab", "read,submit,review", name="alice"),
              "bob": create_token(service.db, "lab", "review", name="bob")}
    clients: list[Browserless] = []

    def client(index: int) -> Browserless:
        made = Browserless(apps[index])
        clients.append(made)
        return made

    try:
        yield {"client": client, "tokens": tokens, "service": service}
    finally:
        for made in clients:
            made.close()
        for app in apps:
            app.state.service.stop()


def test_logging_out_on_one_replica_ends_the_session_on_the_other(two_replicas):
    one, other = two_replicas["client"](0), two_replicas["client"](1)
    csrf = one.login(two_replicas["tokens"]["alice"][0])
    cookie = one.client.cookies.get("dsj_session")
    other.client.cookies.set("dsj_session", cookie)
    assert other.get("/ui/").status_code == 200
    second = two_replicas["client"](1)  # another browser of the same person, on replica 2
    second.login(two_replicas["tokens"]["alice"][0])
    assert one.post("/ui/logout", data={"csrf": csrf}).status_code == 303
    for client in (one, other):
        client.client.cookies.set("dsj_session", cookie)  # a copy kept after logging out
        page = client.get("/ui/")
        assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
        script = client.get("/ui/", headers={"Accept": "application/json"})
        assert script.status_code == 401
        # a form posted with the old cookie is refused before its body is read
        assert client.post("/ui/logout", data={"csrf": csrf},
                           headers={"Accept": "application/json"}).status_code == 401
    assert second.get("/ui/").status_code == 200  # only the session logged out ended


def test_a_revoked_token_ends_its_sessions_on_every_replica(two_replicas):
    from judge.service import revoke_token

    one, other = two_replicas["client"](0), two_replicas["client"](1)
    one.login(two_replicas["tokens"]["bob"][0])
    other.client.cookies.set("dsj_session", one.client.cookies.get("dsj_session"))
    assert other.get("/ui/review").status_code == 200
    assert revoke_token(two_replicas["service"].db, two_replicas["tokens"]["bob"][1]["id"])
    assert one.get("/ui/review").status_code == 303 and other.get("/ui/review").status_code == 303


def test_wrong_tokens_at_the_login_form_are_limited_and_a_valid_one_still_logs_in(
        two_replicas):
    client = two_replicas["client"](0)
    statuses = []
    for attempt in range(5):
        page = client.get("/ui/login")
        nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        answer = client.post("/ui/login", data={"token": f"dsj_wrong{attempt}", "csrf": nonce})
        statuses.append(answer.status_code)
    assert statuses == [401, 401, 401, 429, 429]
    assert int(answer.headers["retry-after"]) >= 1 and "Too many failed logins" in answer.text
    assert "dsj_session" not in answer.headers.get("set-cookie", "")
    csrf = client.login(two_replicas["tokens"]["alice"][0])  # the valid token beside them
    assert csrf and csrf == csrf_of(client.get("/ui/").text)
    # the API's failures share the address's count; its valid tokens pass as well
    assert client.get("/v1/me", headers={"Authorization": "Bearer dsj_nope"}
                      ).status_code == 429
    assert client.get("/v1/me", headers={
        "Authorization": f"Bearer {two_replicas['tokens']['alice'][0]}"}).status_code == 200


@pytest.mark.parametrize(("line", "secret"), [
    ('GET /v1/me?access_token=dsj_AbCdEf123456&limit=2 HTTP/1.1', "dsj_AbCdEf123456"),
    ("GET /ui/login?next=%2Fui%2F&TOKEN=plain-secret HTTP/1.1", "plain-secret"),
    ("GET /x?x_api_key=k3y;other=1", "k3y"),
    ("GET /x?password=hunter2#frag", "hunter2"),
    ("calling with Bearer dsj_a1b2c3d4e5f6g7h8", "a1b2c3d4e5f6g7h8"),
    ("endpoint key sk-canary-0123456789abcdef refused", "canary-0123456789abcdef"),
])
def test_log_lines_lose_their_secrets(line, secret):
    assert secret not in redact(line) and REDACTED in redact(line)
    assert redact("GET /x?keyboard=1&monkey=2&page=3") == "GET /x?keyboard=1&monkey=2&page=3"
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                               '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", line, "1.1", 401), None)
    assert RedactSecrets().filter(record)
    assert secret not in record.getMessage() and "401" in record.getMessage()


def test_the_login_form_without_its_cookie_is_refused_even_with_a_valid_token(two_replicas):
    """A cross-site login: another site posts the form with a valid token (the attacker's) and
    a csrf field, but the browser holds no login-form cookie to match it; no session."""
    client = two_replicas["client"](0)
    page = client.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    client.client.cookies.clear()
    answer = client.post("/ui/login", data={
        "token": two_replicas["tokens"]["alice"][0], "csrf": nonce, "next": "/ui/"})
    assert answer.status_code == 403 and "login form expired" in answer.text
    assert "dsj_session" not in answer.headers.get("set-cookie", "")
    assert client.client.cookies.get("dsj_session") is None
    assert client.get("/ui/").status_code == 303  # still logged out
    # the same post with the cookie the form set logs in: the refusal was the missing cookie
    client.login(two_replicas["tokens"]["alice"][0])
    assert client.get("/ui/").status_code == 200


def test_successful_logins_do_not_count_as_failures(two_replicas):
    """More good logins from one address than the failure limit (3 a minute here): a wrong
    token afterwards is still an ordinary 401, not a 429."""
    client = two_replicas["client"](0)
    for _ in range(5):
        client.login(two_replicas["tokens"]["alice"][0])
    page = client.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    answer = client.post("/ui/login", data={"token": "dsj_wrong", "csrf": nonce})
    assert answer.status_code == 401 and "not valid" in answer.text
    assert client.get("/v1/me", headers={"Authorization": "Bearer dsj_nope"}
                      ).status_code == 401
