"""The leaderboard page in headless Chromium: the systems table sorts by a click on a column
head, each system's interval is drawn (a bar of some width around its dot), the pairwise
matrix holds every pair both ways, a judge run links to its run page, and another project's
session gets the 404 page. No console error, CSP violation or request off the server."""

from __future__ import annotations

import time

import pytest

from tests.conftest import EXAMPLES

from .live import LiveServer
from .test_web_browser import browser, live, log_in, sync_api, watched

__all__ = ["browser", "live", "watched"]  # the fixtures, shared with that module

pytestmark = [pytest.mark.timeout(300), pytest.mark.servers("browser")]


def _finished(api, job_id: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status = api.get(f"/v1/jobs/{job_id}").json()["status"]
        if status not in ("queued", "running"):
            assert status == "succeeded", api.get(f"/v1/jobs/{job_id}").json()
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


def _leaderboard(live: LiveServer, token: str) -> tuple[str, str]:
    with live.api(token) as api:
        def upload(kind: str, name: str) -> str:
            return str(api.post("/v1/files", data={"kind": kind}, files={
                "file": (name, (EXAMPLES / name).read_bytes())}).json()["id"])

        files = {k: upload(k, n) for k, n in (("schema", "schema.json"),
                                               ("dialogues", "dialogues.jsonl"),
                                               ("predictions", "predictions.jsonl"))}
        weak = upload("predictions", "predictions-weak.jsonl")
        run = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                         "options": {"model": "fake-judge"}}).json()["id"]
        _finished(api, run)
        board = api.post("/v1/jobs", json={
            "kind": "leaderboard", "inputs": {"systems": [files["predictions"], weak, run],
                                              "schema": files["schema"],
                                              "dialogues": files["dialogues"]},
            "options": {"names": ["strong", "weak", "judged"]}})
        assert board.status_code == 201, board.text
        _finished(api, board.json()["id"])
        return str(board.json()["id"]), str(run)


def test_the_leaderboard_page_in_chromium(watched, live):
    alice = live.token("alice-lb", "read,submit")
    job, run = _leaderboard(live, alice)
    page = log_in(watched, live, alice)
    page.goto(f"{live.url}/ui/leaderboards/{job}")
    sync_api.expect(page.get_by_role("heading", name="Leaderboard", exact=True)).to_be_visible()
    rows = page.locator("#systems tbody tr")
    sync_api.expect(rows).to_have_count(3)
    names = rows.evaluate_all("rs => rs.map(r => r.dataset.system)")
    assert sorted(names) == ["judged", "strong", "weak"]

    # sortable: the System column, ascending then descending
    head = page.locator("#systems thead th", has_text="System")
    head.click()
    ordered = rows.evaluate_all("rs => rs.map(r => r.dataset.system)")
    head.click()
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.system)") == ordered[::-1]
    assert sorted(ordered) in (ordered, ordered[::-1])

    # intervals drawn: a bar of some width around each system's dot
    intervals = page.locator("#forest g.interval")
    sync_api.expect(intervals).to_have_count(3)
    for index in range(3):
        group = intervals.nth(index)
        bar = group.locator("line.ci").bounding_box()
        dot = group.locator("circle.point").bounding_box()
        assert bar is not None and dot is not None and bar["width"] > 1
        centre = dot["x"] + dot["width"] / 2
        assert bar["x"] - 0.5 <= centre <= bar["x"] + bar["width"] + 0.5

    # the pairwise matrix: every pair, both ways, each with a verdict
    cells = page.locator("#matrix td[data-verdict]")
    sync_api.expect(cells).to_have_count(6)
    verdicts = cells.evaluate_all("cs => cs.map(c => c.dataset.verdict)")
    assert verdicts.count("win") == verdicts.count("loss")

    # another metric by its link, then the judge run's link to its run page
    page.get_by_role("link", name="slot accuracy", exact=True).click()
    sync_api.expect(page.locator("#pairs-h")).to_have_text("Pairwise, slot accuracy")
    page.locator(f"#systems a[href='/ui/runs/{run}']").click()
    sync_api.expect(page).to_have_url(f"{live.url}/ui/runs/{run}")
    watched.clean()


def test_another_project_gets_404_in_chromium(browser, live):
    alice = live.token("alice-lb2", "read,submit")
    job, _ = _leaderboard(live, alice)
    eve = live.token("eve-lb", "read,submit", project="elsewhere")
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{live.url}/ui/login")
        page.get_by_label("Token").fill(eve)
        page.get_by_role("button", name="Log in").click()
        sync_api.expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        response = page.goto(f"{live.url}/ui/leaderboards/{job}")
        assert response is not None and response.status == 404
        assert page.locator("#systems, #forest, #matrix").count() == 0
        assert "judged" not in page.content()
    finally:
        context.close()
