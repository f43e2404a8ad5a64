"""The web's session cookie holds no credential (issue 40, item 8): a stolen cookie, even
opened with the server's own key, gives nothing that works on the API; the session it names
is a row of the database that stands for the token, so logging out and revoking still end it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.service import build_settings, create_app, create_token, revoke_token
from judge.service.auth._auth import hash_token
from judge.service.db._db import web_sessions
from judge.web import mount_web

from .conftest import Browserless


@pytest.fixture
def app(tmp_path: Path) -> Any:
    settings = build_settings({"data_dir": tmp_path / "data", "job_slots": 0,
                               "auth_failures_per_minute": 0, "requests_per_minute": 0})
    made = create_app(settings)
    mount_web(made)
    made.state.service.start()
    try:
        yield made
    finally:
        made.state.service.stop()


def _everything_in(cookie: str, app: Any) -> list[str]:
    """The cookie as sent and every string it holds, opened with the server's key."""
    opened = json.loads(app.state.web.sessions.fernet.decrypt(cookie.encode()))
    found = [cookie, json.dumps(opened)]
    found += [str(v) for v in (opened.values() if isinstance(opened, dict) else opened)]
    return found


def test_a_stolen_cookie_opened_with_the_key_holds_nothing_that_works_on_the_api(app):
    service = app.state.service
    token, record = create_token(service.db, "lab", "read,submit,review", name="alice")
    browser = Browserless(app)
    thief = Browserless(app)
    try:
        browser.login(token)
        cookie = browser.client.cookies.get("dsj_session")
        assert cookie and browser.get("/ui/").status_code == 200
        contents = _everything_in(cookie, app)
        assert not any(token in text or token[4:] in text or hash_token(token) in text
                       for text in contents), contents
        for text in contents:  # nothing in it is a bearer token of the API
            answer = thief.get("/v1/me", headers={"Authorization": f"Bearer {text}"})
            assert answer.status_code == 401, (text, answer.text)
        # the session row names the token; the cookie's session id is stored only hashed
        with service.db.read() as conn:
            rows = conn.execute(web_sessions.select()).all()
        assert [row.token_id for row in rows] == [record["id"]]
        assert all(row.id not in " ".join(contents) for row in rows)
        # the cookie still opens the pages (on any browser) until the session ends
        thief.client.cookies.set("dsj_session", cookie)
        assert thief.get("/ui/").status_code == 200
        revoke_token(service.db, record["id"])
        assert thief.get("/ui/").status_code == 303 and browser.get("/ui/").status_code == 303
    finally:
        browser.close()
        thief.close()


def test_a_pages_csrf_token_is_its_sessions_and_logging_out_ends_only_that_one(app):
    service = app.state.service
    token, _ = create_token(service.db, "lab", "read,submit,review", name="alice")
    first, second = Browserless(app), Browserless(app)
    try:
        csrf_one, csrf_two = first.login(token), second.login(token)
        assert csrf_one and csrf_two and csrf_one != csrf_two
        # one session's CSRF token does not pass on another session
        refused = second.post("/ui/logout", data={"csrf": csrf_one})
        assert refused.status_code == 403
        assert first.post("/ui/logout", data={"csrf": csrf_one}).status_code == 303
        assert first.get("/ui/").status_code == 303 and second.get("/ui/").status_code == 200
    finally:
        first.close()
        second.close()
