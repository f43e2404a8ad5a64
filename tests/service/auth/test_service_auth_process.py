"""Logins, sessions, failed-auth limits, logs and probes against real ``dst-judge serve``
processes: two replicas on one database (127.0.0.1, bounded, stopped by themselves).

* A 150 MB body sent to the login form is answered from its headers (issue 36, item 1).
* Logging out on one replica ends the session on the other at once (item 2).
* Wrong tokens at the login form meet the same per-address limit as the API's (item 3), and
  a valid token from that address still passes, at the form and at ``/v1`` (item 4).
* A token sent in the query string is refused and never written to the log (item 8).
* ``/healthz`` tells a probe without an admin token only that the process lives; ``/metrics``
  answers only an admin token (item 9).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge.service import Database, create_token, revoke_token
from tests.service import hostile
from tests.service.serve_process import ServeProcess

pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]

FAILURES = 5
"""Failed authentications per address and minute on both replicas."""


def _tokens(data_dir: Path) -> dict[str, Any]:
    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(f"sqlite:///{data_dir / 'dst-judge.db'}")
    try:
        db.migrate()
        made = {name: create_token(db, "lab", scopes, name=name)
                for name, scopes in (("alice", "read,submit,review"), ("reader", "read"),
                                     ("root", "admin"))}
        return {name: token for name, (token, _) in made.items()} | {
            "ids": {name: record["id"] for name, (_, record) in made.items()},
            "db": str(db.engine.url)}
    finally:
        db.dispose()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("replicas")
    tokens = _tokens(data)
    limits = ["--auth-failures-per-minute", str(FAILURES), "--requests-per-minute", "0"]
    # replica a: a worker thread (what /healthz could show), its access log on
    with ServeProcess(data, args=["--jobs", "1", "--worker", "thread", *limits,
                                  "--log-level", "info"], max_seconds=280) as a, \
            ServeProcess(data, args=["--jobs", "0", *limits], max_seconds=280) as b:
        yield {"a": a, "b": b, "tokens": tokens}


def _client(server: ServeProcess) -> httpx.Client:
    return httpx.Client(base_url=server.url, trust_env=False, timeout=30)


def _nonce(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, (page.status_code, page.text[:300])
    return found.group(1)


def _login(client: httpx.Client, token: str) -> httpx.Response:
    page = client.get("/ui/login")
    return client.post("/ui/login", data={"token": token, "csrf": _nonce(page), "next": "/ui/"})


def test_the_login_form_answers_a_150mb_body_from_its_headers(replicas):
    a, root = replicas["a"], replicas["tokens"]["root"]
    multipart = {"Content-Type": "multipart/form-data; boundary=b"}
    for label, headers, status in (("no form cookie", {}, 403),
                                   ("a form cookie", {"Cookie": "dsj_login=n0nce"}, 413)):
        before = hostile.received_bytes(a.url, root)
        answered, seconds, _ = hostile.announced_upload(
            a.port, "POST", "/ui/login", length=150 << 20, headers={**multipart, **headers},
            send_for=5.0)
        time.sleep(0.2)
        received = hostile.received_bytes(a.url, root) - before
        assert answered == status and seconds is not None, (label, answered)
        assert received <= 1 << 20, f"{label}: the server took {received / 2 ** 20:.1f} MB"
    # a page's form without a session: refused from the headers too
    before = hostile.received_bytes(a.url, root)
    answered, _, _ = hostile.announced_upload(a.port, "POST", "/ui/runs/new",
                                              length=150 << 20, headers=multipart)
    time.sleep(0.2)
    assert answered == 401 and hostile.received_bytes(a.url, root) - before <= 1 << 20


def test_logging_out_on_one_replica_ends_the_session_on_every_replica(replicas):
    a, b, tokens = replicas["a"], replicas["b"], replicas["tokens"]
    with _client(a) as on_a, _client(b) as on_b:
        assert _login(on_a, tokens["alice"]).status_code == 303
        cookie = on_a.cookies.get("dsj_session")
        assert cookie
        on_b.cookies.set("dsj_session", cookie)
        assert on_b.get("/ui/").status_code == 200  # the same session on the other replica
        csrf = re.search(r'<meta name="csrf-token" content="([^"]*)">',
                         on_a.get("/ui/").text).group(1)
        assert on_a.post("/ui/logout", data={"csrf": csrf}).status_code == 303
        # the browser dropped the cookie; a copy of it opens nothing, anywhere
        for client in (on_a, on_b):
            client.cookies.set("dsj_session", cookie)
            page = client.get("/ui/")
            assert page.status_code == 303 and page.headers["location"].startswith(
                "/ui/login"), (client.base_url, page.status_code)
            script = client.get("/ui/", headers={"Accept": "application/json"})
            assert script.status_code == 401
        # a revoked token ends its live sessions on every replica too
        on_a.cookies.clear()
        assert _login(on_a, tokens["reader"]).status_code == 303
        on_b.cookies.set("dsj_session", on_a.cookies.get("dsj_session"))
        assert on_b.get("/ui/").status_code == 200
        db = Database(tokens["db"])
        try:
            assert revoke_token(db, tokens["ids"]["reader"])
        finally:
            db.dispose()
        assert on_b.get("/ui/").status_code == 303 and on_a.get("/ui/").status_code == 303


def test_failed_logins_are_limited_and_valid_tokens_beside_them_still_pass(replicas):
    b, tokens = replicas["b"], replicas["tokens"]
    with _client(b) as client:
        answers = [_login(client, f"dsj_wrong-{i}") for i in range(FAILURES + 2)]
        assert [r.status_code for r in answers[:FAILURES]] == [401] * FAILURES
        assert answers[-1].status_code == 429, [r.status_code for r in answers]
        assert int(answers[-1].headers["retry-after"]) >= 1
        assert "Too many failed logins" in answers[-1].text
        # the API's failures and the form's are one count per address
        guess = client.get("/v1/me", headers={"Authorization": "Bearer dsj_guess"})
        assert guess.status_code == 429
        # a person with a valid token behind the same address logs in and calls the API
        assert _login(client, tokens["alice"]).status_code == 303
        assert client.get("/ui/").status_code == 200
        me = client.get("/v1/me", headers={"Authorization": f"Bearer {tokens['alice']}"})
        assert me.status_code == 200
    assert "Traceback" not in b.log.read_text(errors="replace")


def test_a_token_in_the_query_string_is_refused_and_never_logged(replicas):
    a, tokens = replicas["a"], replicas["tokens"]
    secret = tokens["alice"]
    with _client(a) as client:
        assert client.get("/v1/me", params={"access_token": secret}).status_code == 401
        assert client.get("/ui/login", params={"next": "/ui/", "token": secret}
                          ).status_code == 200
        assert client.get(f"/v1/files?api_key={secret}&limit=2").status_code == 401
    deadline = time.monotonic() + 10
    while "access_token=" not in (text := a.log.read_text(errors="replace")):
        assert time.monotonic() < deadline, "no access log line for the request"
        time.sleep(0.1)
    time.sleep(0.3)  # the other two lines
    text = a.log.read_text(errors="replace")
    assert secret not in text and secret[4:] not in text
    assert "access_token=[redacted]" in text and "api_key=[redacted]&limit=2" in text


def test_probes_see_liveness_and_only_an_admin_sees_the_details(replicas):
    a, tokens = replicas["a"], replicas["tokens"]
    with _client(a) as client:
        plain = client.get("/healthz")
        assert plain.status_code == 200 and plain.json() == {"status": "ok"}
        for who in ("alice", "reader"):  # tokens without the admin scope: the same answer
            answer = client.get("/healthz", headers={"Authorization": f"Bearer {tokens[who]}"})
            assert answer.json() == {"status": "ok"}, who
        details = client.get("/healthz", headers={"Authorization": f"Bearer {tokens['root']}"})
        worker = details.json()["worker"]
        assert details.json()["database"] == "ok" and worker["alive"], details.json()
        shown = json.dumps(worker)
        assert str(a.process.pid) in shown  # what the plain answer no longer gives away
        assert str(a.process.pid) not in plain.text
        assert client.get("/metrics").status_code == 401
        reader = client.get("/metrics", headers={"Authorization": f"Bearer {tokens['alice']}"})
        assert reader.status_code == 403
        metrics = client.get("/metrics", headers={"Authorization": f"Bearer {tokens['root']}"})
        assert metrics.status_code == 200 and 'dst_judge_jobs{status="queued"}' in metrics.text
        assert client.get("/readyz").status_code == 200
