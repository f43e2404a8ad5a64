"""Fixtures of the web interface tests: the service app in-process (httpx over ASGI, with a
cookie jar, for page-level checks) and, for the browser tests, a live server with Debian's
Chromium driven by Playwright."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge.service import create_token
from tests.conftest import EXAMPLES
from tests.fault_server import FaultServer
from tests.service.conftest import running_service, service_settings

from .live import CANARY_KEY
from .synthetic import bundle, synthetic_rows


class Browserless:
    """A synchronous cookie-keeping client on the app in this process (no network)."""

    def __init__(self, app: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                        base_url="http://testserver", follow_redirects=False)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        future = asyncio.run_coroutine_threadsafe(self.client.request(method, url, **kwargs),
                                                  self.loop)
        return future.result(60)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def login(self, token: str) -> str:
        """Log in through the form; returns the session's CSRF token."""
        self.client.cookies.clear()
        page = self.get("/ui/login")
        nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        done = self.post("/ui/login", data={"token": token, "csrf": nonce, "next": "/ui/"})
        assert done.status_code == 303, done.text
        return csrf_of(self.get("/ui/").text)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def csrf_of(html: str) -> str:
    return re.search(r'<meta name="csrf-token" content="([^"]*)">', html).group(1)


@pytest.fixture
def web(tmp_path: Path, fake_model: FaultServer) -> Iterator[dict[str, Any]]:
    """A started service with tokens of every kind in project 'lab' (and one in 'other'),
    the example files uploaded, and a client per token name."""
    settings = service_settings(tmp_path / "data", fake_model.url, endpoints={
        "fake": {"base_url": fake_model.url, "api_key": CANARY_KEY}})
    clients: list[Browserless] = []
    with running_service(settings, web=True) as (service, app):
        tokens = {
            "alice": create_token(service.db, "lab", "read,submit,review", name="alice")[0],
            "reader": create_token(service.db, "lab", "read", name="reader")[0],
            "bob": create_token(service.db, "lab", "review", name="bob")[0],
            "runner": create_token(service.db, "lab", "read,submit", name="runner")[0],
            "eve": create_token(service.db, "other", "read,submit,review", name="eve")[0],
        }

        def client() -> Browserless:
            made = Browserless(app)
            clients.append(made)
            return made

        try:
            yield {"app": app, "service": service, "tokens": tokens, "client": client,
                   "settings": settings}
        finally:
            for made in clients:
                made.close()


def import_run(web: dict[str, Any], data: bytes, token: str = "alice") -> str:
    """Import a bundle through the API (as the given token); returns the job id."""
    api = Browserless(web["app"])
    try:
        response = api.post("/v1/bundles", files={"file": ("run.tar.gz", data)},
                            headers={"Authorization": f"Bearer {web['tokens'][token]}"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])
    finally:
        api.close()


def draw_form(client: Any, csrf: str, job_id: str, n: int, seed: int = 0) -> httpx.Response:
    """A reviewer's draw of a run's review sample through the page's form (a POST with the
    CSRF field); returns the sample queue's page it leads to."""
    response = client.post(f"/ui/review/{job_id}/sample",
                           data={"n": str(n), "seed": str(seed), "csrf": csrf})
    assert response.status_code == 303, response.text[:300]
    assert response.headers["location"].endswith(f"?queue=sample&n={n}&seed={seed}")
    return client.get(response.headers["location"])


@pytest.fixture
def synthetic_run(web: dict[str, Any]) -> str:
    """A finished 160-turn run (imported bundle) in project 'lab'."""
    return import_run(web, bundle(synthetic_rows(160, seed=3)))


EXAMPLE_FILES = (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                 ("predictions", "predictions.jsonl"))


def example_upload() -> dict[str, tuple[str, bytes]]:
    return {f"{kind}_file": (name, (EXAMPLES / name).read_bytes())
            for kind, name in EXAMPLE_FILES}
