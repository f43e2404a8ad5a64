"""The API reference works offline: ``/docs`` (Swagger UI) loads its script and style from the
server itself (the ``fastapi-offline`` package's files), and in a headless Chromium whose every
request to another host is aborted it renders all operations with no console error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser import launched
from tests.service.http.test_service_openapi import OPERATIONS
from tests.web.live import LiveServer

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers("browser")]

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python playwright package; they use Debian's Chromium")



def test_the_docs_pages_name_only_local_assets(service_env):
    api = service_env["api"]
    html = api.get("/docs", token="").text
    assert "/docs-assets/swagger-ui-bundle.js" in html and "://" not in html
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
        assert api.get(f"/docs-assets/{asset}", token="").status_code == 200, asset
    assert api.get("/redoc", token="").status_code == 404  # ReDoc would call a CDN


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("docs-live")
    with LiveServer(folder / "data", "http://127.0.0.1:9") as server:
        yield server


@pytest.fixture(scope="module")
def browser(live) -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


class Offline:
    """A page on which every request to a host other than 127.0.0.1 is aborted and noted,
    with its console errors and uncaught exceptions."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page.on("console",
                     lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()


@pytest.fixture
def offline(browser) -> Iterator[Offline]:
    page = Offline(browser)
    yield page
    page.context.close()


def test_swagger_ui_renders_every_operation_offline(offline, live):
    page = offline.page
    page.goto(live.url + "/docs")
    operations = page.locator(".opblock")
    sync_api.expect(operations).to_have_count(len(OPERATIONS))
    sync_api.expect(page.locator(".opblock-summary-operation-id",
                                 has_text="create_job")).to_be_visible()
    sync_api.expect(page.get_by_role("button", name="Authorize")).to_be_visible()
    assert offline.blocked == [] and offline.errors == []
