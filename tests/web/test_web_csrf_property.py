"""Every state-changing route of the web interface refuses a request whose CSRF token is
missing or wrong (docs: "CSRF tokens on every form"): a property over the routes read from the
app at run time, so a route added later is covered without anyone listing it.

For each POST/PUT/PATCH/DELETE route under ``/ui`` a logged-in person with every scope sends
the request without a token, with a made-up one (as form field, as header, as both), and with
the token of another person's session: each answer is 403 and no row of the database changes.
With the session's own token the same request is not refused with 403 (the control: the token,
not the body, decided). The login form, which has no session yet, is held to its double-submit
cookie the same way."""

from __future__ import annotations

from typing import Any

import pytest

from tests.app_surface import STATE_CHANGING, changed_tables, database_rows, routes, web_login

from .conftest import Browserless
from .synthetic import synthetic_rows

WRONG = "forged-" + "x" * 24


def _state_changing(app: Any) -> list[Any]:
    found = [r for r in routes(app) if r.path.startswith("/ui/") and r.methods & STATE_CHANGING]
    assert len(found) >= 3, [r.path for r in found]  # the enumeration itself works
    return found


def _values(job_id: str) -> dict[str, Any]:
    first = synthetic_rows(160, seed=3)[0]
    return {"job_id": job_id, "dialogue_id": first["dialogue_id"],
            "turn_index": first["turn_index"], "name": "audit.html"}


def _send(client: Browserless, method: str, url: str, *, form: str | None,
          header: str | None, label: dict[str, Any]) -> Any:
    """The request as a page would send it: the form field ``csrf`` (when given) in a form
    body, or the label JSON body of the review page's script; ``X-CSRF-Token`` when given."""
    headers = {"Accept": "text/html"}
    if header is not None:
        headers["X-CSRF-Token"] = header
    if form is not None:
        return client.request(method, url, data={"csrf": form, "back": "/ui/"},
                              headers=headers)
    return client.request(method, url, json=label, headers=headers)


def _attempts(own: str, stranger: str) -> dict[str, tuple[str | None, str | None]]:
    """(form field, header) of each refused variant."""
    return {"no token": (None, None), "empty field": ("", None),
            "made-up field": (WRONG, None), "made-up header": (None, WRONG),
            "made-up field and header": (WRONG, WRONG),
            "another session's field": (stranger, None),
            "another session's header": (None, stranger),
            "own token with a character changed": (own[:-1] + ("A" if own[-1] != "A"
                                                               else "B"), None)}


def test_every_state_changing_route_refuses_a_missing_or_wrong_csrf_token(web, synthetic_run):
    app = web["app"]
    db_url = web["settings"].db_url
    first = synthetic_rows(160, seed=3)[0]
    label = {"dialogue_id": first["dialogue_id"], "turn_index": first["turn_index"],
             "label": "incorrect", "note": "csrf"}
    stranger = web["client"]()
    stranger_csrf = web_login(stranger, web["tokens"]["bob"])
    refused: list[tuple[str, str, str, int]] = []
    controls: list[tuple[str, str, int]] = []
    for route in _state_changing(app):
        if route.path == "/ui/login":
            continue  # no session yet: its own test below
        url = route.url(_values(synthetic_run))
        for method in sorted(route.methods & STATE_CHANGING):
            client = web["client"]()
            own = web_login(client, web["tokens"]["alice"])
            before = database_rows(db_url)
            for name, (form, header) in _attempts(own, stranger_csrf).items():
                answer = _send(client, method, url, form=form, header=header, label=label)
                if answer.status_code != 403:
                    refused.append((route.path, method, name, answer.status_code))
            changed = changed_tables(before, database_rows(db_url))
            assert not changed, f"{method} {route.path} without its CSRF token changed {changed}"
            # the control: the session still works, and its own token is accepted
            assert client.get("/ui/").status_code == 200, f"{route.path} ended the session"
            for form, header in ((own, own), (None, own)):
                answer = _send(client, method, url, form=form, header=header, label=label)
                if answer.status_code == 403:
                    controls.append((route.path, method, answer.status_code))
                    break
    assert not refused, f"requests with a missing or wrong CSRF token were not refused: {refused}"
    assert not controls, f"the session's own CSRF token was refused: {controls}"


@pytest.mark.parametrize("nonce", ["missing", "wrong", "other cookie"])
def test_the_login_form_refuses_a_missing_or_wrong_token(web, nonce):
    app = web["app"]
    assert any(r.path == "/ui/login" and "POST" in r.methods for r in routes(app))
    client = web["client"]()
    page = client.get("/ui/login")
    assert page.status_code == 200
    given = {"missing": "", "wrong": WRONG,
             "other cookie": web_login_nonce(web["client"]())}[nonce]
    answer = client.post("/ui/login", data={"token": web["tokens"]["alice"], "csrf": given,
                                            "next": "/ui/"})
    assert answer.status_code == 403, answer.status_code
    assert "dsj_session" not in answer.headers.get("set-cookie", "")
    home = client.get("/ui/")  # still logged out: sent to the login page
    assert home.status_code == 303 and "/ui/login" in home.headers["location"], home.headers


def web_login_nonce(client: Browserless) -> str:
    import re

    page = client.get("/ui/login")
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
