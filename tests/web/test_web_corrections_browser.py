"""The candidates queue in headless Chromium: two reviewers decide the same label-error
candidate differently with the keyboard (``a`` accepts, ``r`` rejects, ``e`` types a value),
the candidate shows in the adjudication view, the reviewer named ``adjudicator`` settles it,
progress and the reviewers' agreement follow, and the corrections file downloads with the
adjudication in it. No console error, CSP violation or request off the server."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conftest import EXAMPLES

from .live import LiveServer
from .test_web_browser import Watched, browser, live, log_in, sync_api, watched

__all__ = ["browser", "live", "watched"]  # the fixtures, shared with that module

pytestmark = [pytest.mark.timeout(300), pytest.mark.servers("browser")]


def _judged(live: LiveServer, token: str) -> str:
    with live.api(token) as api:
        files = {kind: api.post("/v1/files", data={"kind": kind}, files={
            "file": (name, (EXAMPLES / name).read_bytes())}).json()["id"]
            for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                               ("predictions", "predictions.jsonl"))}
        job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                         "options": {"model": "fake-judge"}}).json()["id"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status = api.get(f"/v1/jobs/{job}").json()["status"]
            if status in ("succeeded", "failed", "cancelled", "stopped"):
                assert status == "succeeded"
                return str(job)
            time.sleep(0.2)
    raise AssertionError("the run did not finish")


def _person(browser: Any, live: LiveServer, token: str) -> Watched:
    context = browser.new_context(viewport={"width": 1400, "height": 900},
                                  accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    person = Watched(page, live.url)
    log_in(person, live, token)
    return person


def _queue(person: Watched, live: LiveServer, job: str, pos: int = 0) -> Any:
    page = person.page
    page.goto(f"{live.url}/ui/corrections/{job}?pos={pos}")
    sync_api.expect(page.get_by_role("heading", name="Label-error candidates",
                                     exact=False)).to_be_visible(timeout=30_000)
    return page


def test_two_reviewers_an_adjudication_and_the_export_in_chromium(browser, watched, live,
                                                                   tmp_path):
    alice = live.token("alice-c", "read,submit,review")
    bob = live.token("bob-c", "read,review")
    adjudicator = live.token("adjudicator", "read,review")
    job = _judged(live, alice)

    log_in(watched, live, alice)
    page = _queue(watched, live, job)
    candidate = page.locator("input[name=candidate]").get_attribute("value")
    suggested = page.locator("#cand-suggested").inner_text()
    assert page.locator("#cand-annotated").inner_text() and suggested
    page.keyboard.press("a")  # accept the suggestion: saved, on to the next candidate
    sync_api.expect(page.locator("#saved-note")).to_be_visible()
    sync_api.expect(page.locator("[data-field=reviewed]")).to_have_text("1")

    second = _person(browser, live, bob)
    bob_page = _queue(second, live, job)
    assert bob_page.locator("input[name=candidate]").get_attribute("value") == candidate
    bob_page.keyboard.press("r")  # the annotation is right
    sync_api.expect(bob_page.locator("[data-field=disputed]")).to_have_text("1")
    bob_page.keyboard.press("e")  # the next candidate: type a value, Enter saves it
    bob_page.keyboard.type("centre")
    bob_page.keyboard.press("Enter")
    sync_api.expect(bob_page.locator("[data-field=reviewed]")).to_have_text("2")
    assert "same decision 0.0 %" in bob_page.locator("#reviewer-agreement").inner_text()

    third = _person(browser, live, adjudicator)
    disputes = third.page
    disputes.goto(f"{live.url}/ui/corrections/{job}/disputes")
    row = disputes.locator(f"tr[data-candidate='{candidate}']")
    sync_api.expect(row.locator(".state")).to_have_text("disputed")
    row.get_by_role("button", name="Suggestion").click()
    row = disputes.locator(f"tr[data-candidate='{candidate}']")
    sync_api.expect(row.locator(".state")).to_contain_text("adjudicated")

    page = _queue(watched, live, job)
    sync_api.expect(page.locator("[data-field=disputed]")).to_have_text("0")
    sync_api.expect(page.locator("[data-field=adjudicated]")).to_have_text("1")
    with page.expect_download() as info:
        page.locator("#download").click()
    path = tmp_path / "corrections.jsonl"
    info.value.save_as(path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    mine = [r for r in records if r["candidate"] == candidate]
    assert [(r["reviewer"], r.get("adjudicated", False)) for r in mine] == [
        ("alice-c", False), ("bob-c", False), ("adjudicator", True)]
    assert mine[1]["value"] == mine[1]["was"] and mine[2]["value"] == mine[0]["value"]
    assert any(r["value"] == "centre" and r["reviewer"] == "bob-c" for r in records)
    for person in (watched, second, third):
        person.clean()
    second.page.context.close()
    third.page.context.close()


_CONTRAST = """(el) => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ?
      v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
      .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let node = el, back = null;
  while (node) {
    const c = rgb(getComputedStyle(node).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0)) { back = c.slice(0, 3); break; }
    node = node.parentElement;
  }
  const fore = rgb(getComputedStyle(el).color).slice(0, 3);
  const [a, b] = [lum(fore), lum(back || [255, 255, 255])].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""

_GAPS = """() => [...document.querySelectorAll('#progress > div')].map((row) => {
  const box = (el) => { const r = document.createRange(); r.selectNodeContents(el);
                        return r.getBoundingClientRect(); };
  const dt = box(row.querySelector('dt')), dd = box(row.querySelector('dd'));
  return [row.querySelector('dt').textContent, dd.left - dt.right];
})"""


def test_the_queue_reads_in_chromium_key_hints_and_progress(browser, watched, live):
    """The Accept button's key hint is readable (it was white on white), and the progress
    panel keeps a gap between each label and its number (it read ``candidates6``)."""
    alice = live.token("alice-k", "read,submit,review")
    job = _judged(live, alice)
    log_in(watched, live, alice)
    page = _queue(watched, live, job)
    for selector in ("#accept kbd", "#reject kbd", "#edit kbd"):
        ratio = page.locator(selector).evaluate(_CONTRAST)
        assert ratio >= 3, (selector, ratio)
    gaps = page.evaluate(_GAPS)
    assert gaps and all(gap >= 4 for _, gap in gaps), gaps
    watched.clean()
