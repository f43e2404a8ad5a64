"""Every route of the web interface, taken from the app (not from a list kept here), refuses a
request without a session, and every state-changing one refuses a missing or wrong CSRF
token: the checks are dependencies of the router, so a new route cannot forget them."""

from __future__ import annotations

from typing import Any

import pytest

from judge.web import PREFIX

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
PUBLIC = {("GET", PREFIX + "/login"), ("POST", PREFIX + "/login")}
"""The login form: the only routes a browser without a session may use."""
CSRF_REFUSAL = "security token is missing or stale"


def _routes(app: Any) -> list[tuple[str, Any]]:
    """(method, route) of every route under the prefix, as the app serves it: the routes of
    included routers with the dependencies they got from the routers (FastAPI 0.165 keeps
    included routers apart and lists their effective routes through
    ``iter_route_contexts``; older versions copy them into ``app.routes``)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        contexts = list(app.routes)
    else:
        contexts = list(iter_route_contexts(app.routes))
    found = []
    for route in contexts:
        path = getattr(route, "path", None) or ""
        if getattr(route, "dependant", None) is None:
            continue  # the static files, the API's docs
        if path == PREFIX or path.startswith(PREFIX + "/"):
            found.extend((method, route) for method in sorted(route.methods))
    return found


def _url(route: Any, job_id: str, dialogue_id: str) -> str:
    values = {"job_id": job_id, "dialogue_id": dialogue_id, "turn_index": 0,
              "name": "report.html"}
    names = {p.name for p in route.dependant.path_params}
    assert names <= set(values), f"{route.path}: no test value for {names - set(values)}"
    return route.path_format.format(**{k: v for k, v in values.items() if k in names})


@pytest.fixture
def routes(web: dict[str, Any], synthetic_run: str) -> list[tuple[str, str]]:
    """(method, URL with the ids of a real run) of every route of the interface."""
    project = web["service"].tokens.resolve_token(web["tokens"]["alice"]).project_id
    dialogue_id = next(web["service"].jobs.judgments(project, synthetic_run))["dialogue_id"]
    found = [(method, _url(route, synthetic_run, dialogue_id))
             for method, route in _routes(web["app"])]
    assert len(found) >= 19, found  # the enumeration itself works
    return found


def test_the_login_form_is_the_only_route_without_the_guard(web):
    from judge.web._session import guard

    routes = _routes(web["app"])
    unguarded = {(method, route.path) for method, route in routes
                 if not any(d.call is guard for d in route.dependant.dependencies)}
    assert unguarded == PUBLIC
    assert len(routes) - len(unguarded) >= 19


def test_every_route_refuses_a_request_without_a_session(web, routes):
    client = web["client"]()
    for method, url in routes:
        if (method, url) in PUBLIC:
            continue
        answer = client.request(method, url, headers={"Accept": "application/json"})
        assert answer.status_code == 401, (method, url, answer.status_code, answer.text[:200])
        assert answer.json()["error"]["message"] == "please log in with your token"
        if method == "GET":
            page = client.get(url)
            assert page.status_code == 303, (url, page.status_code)
            assert page.headers["location"].startswith(PREFIX + "/login?next=")
    client.client.cookies.set("dsj_session", "not-a-session")
    for method, url in routes:
        if (method, url) not in PUBLIC:
            forged = client.request(method, url, headers={"Accept": "application/json"})
            assert forged.status_code == 401, (method, url)


def test_every_state_changing_route_refuses_a_missing_or_wrong_csrf_token(web, routes):
    changing = [(m, u) for m, u in routes if m in STATE_CHANGING]
    assert len(changing) >= 4, changing  # cancel, submit, labels, logout, login
    client = web["client"]()
    for method, url in changing:
        csrf = client.login(web["tokens"]["alice"])
        json_accept = {"Accept": "application/json"}
        attempts = {
            "no token (form)": {"data": {"back": PREFIX + "/"}},
            "no token (JSON)": {"json": {"label": "correct"}},
            "wrong token (form)": {"data": {"csrf": csrf[:-2] + "xx"}},
            "wrong token (header)": {"json": {}, "headers": {"X-CSRF-Token": "x" + csrf}},
            "another session's token": {"data": {"csrf": _other_session_csrf(web)}},
        }
        for what, kwargs in attempts.items():
            headers = {**json_accept, **kwargs.pop("headers", {})}
            answer = client.request(method, url, headers=headers, **kwargs)
            assert answer.status_code == 403, (what, method, url, answer.status_code)
            if (method, url) not in PUBLIC:
                assert CSRF_REFUSAL in answer.json()["error"]["message"], (what, url)
        if (method, url) in PUBLIC:
            continue
        # the same request with the session's token passes the check (whatever it then says)
        right = client.request(method, url, headers={**json_accept, "X-CSRF-Token": csrf},
                               json={})
        assert right.status_code != 403 or CSRF_REFUSAL not in right.text, (method, url)


def _other_session_csrf(web: dict[str, Any]) -> str:
    other = web["client"]()
    return other.login(web["tokens"]["runner"])
