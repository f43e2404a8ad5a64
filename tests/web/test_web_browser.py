"""The web interface in a real headless Chromium against a live server and the fake model
server: log in, upload the example, run it, watch it finish, open a turn, label three turns
with the keyboard, watch agreement update, export the labels and read them back with
``dst-judge agreement``; hostile data stays inert; forms are labelled and focus starts at the
skip link.

Debian's Chromium (``/usr/bin/chromium``) is driven through Playwright; when it is missing,
the fixture installs it with apt-get where it can and otherwise skips saying why.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.analysis import load_labels
from tests.browser import launched
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer
from tests.netguard.sitecustomize import subprocess_pythonpath

from .live import LiveServer
from .synthetic import XSS, XSS_LINK, bundle, synthetic_rows

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers("browser")]

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python playwright package (pip install playwright); "
           "they use Debian's Chromium, not playwright's own browser downloads")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("web-live")
    with FaultServer(FaultConfig(latency=0.25)) as model, \
            LiveServer(folder / "data", model.url) as server:
        yield server


@pytest.fixture(scope="module")
def browser(live):
    with launched() as chromium:
        yield chromium


class Watched:
    """A page with what went wrong on it: console errors, uncaught exceptions, dialogs, CSP
    violations and requests to anything but the live server."""

    def __init__(self, page: Any, origin: str) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: None if r.url.startswith((origin, "data:", "blob:"))
                else self.errors.append(f"request off the server: {r.url}"))
        page.add_init_script(
            "window.__csp = []; document.addEventListener('securitypolicyviolation',"
            " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")

    def clean(self) -> None:
        assert self.errors == [] and self.dialogs == []
        assert self.page.evaluate("window.__csp") == []
        assert self.page.evaluate("window.pwned") is None


@pytest.fixture
def watched(browser, live) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 900},
                                  accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield Watched(page, live.url)
    context.close()


def log_in(watched: Watched, live: LiveServer, token: str) -> Any:
    page = watched.page
    page.goto(live.url + "/ui/")
    sync_api.expect(page).to_have_url(live.url + "/ui/login?next=%2Fui%2F")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    sync_api.expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    return page


def test_scenario_run_label_agree_export(watched, live, tmp_path):
    alice = live.token("alice", "read,submit,review")
    carol = live.token("carol", "review")
    page = log_in(watched, live, alice)
    cookie = next(c for c in page.context.cookies() if c["name"] == "dsj_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and alice not in cookie["value"]

    # submit the example from uploaded files
    page.get_by_role("link", name="New evaluation").first.click()
    for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                       ("predictions", "predictions.jsonl")):
        page.locator(f"#{kind}_file").set_input_files(str(EXAMPLES / name))
    page.locator("#f-concurrency").fill("2")
    page.get_by_role("button", name="Submit evaluation").click()

    # watch it run: the badge and the progress bar change without reloading the page
    badge = page.locator(".run-head [data-field=status]")
    sync_api.expect(badge).to_have_text("running", timeout=20_000)
    page.wait_for_function("() => { const p = document.querySelector('.run-head progress');"
                           " return p && p.value > 0 && p.value < p.max; }")
    # when it ends the page shows the turns (11 in the example)
    sync_api.expect(page.locator("#match-count")).to_have_text("11", timeout=30_000)
    sync_api.expect(badge).to_have_text("succeeded")
    job_id = page.url.rsplit("/", 1)[1]
    assert page.locator(".run-head [data-field=tsa]").inner_text().endswith("%")

    # open a turn (a deep link) and see the dialogue, states, replies and trace
    page.locator("table.turns a").nth(2).click()
    sync_api.expect(page.get_by_role("heading", name="EX001.json · turn 2")).to_be_visible()
    assert "worth house" in page.locator(".states").first.inner_text()
    assert page.locator("pre.reply").count() == 2
    assert "passes every check" in page.locator("table.trace").inner_text()
    deep = page.url
    page.goto(deep)
    sync_api.expect(page.get_by_role("heading", name="EX001.json · turn 2")).to_be_visible()

    # carol has labelled every turn correct (through the API)
    with live.api(carol) as api:
        for line in (EXAMPLES / "dialogues.jsonl").read_text().splitlines():
            dialogue = json.loads(line)
            for turn in dialogue["turns"]:
                done = api.put("/v1/labels", json={
                    "dialogue_id": dialogue["dialogue_id"], "turn_index": turn["turn_index"],
                    "label": "correct", "job_id": job_id})
                assert done.status_code == 200

    # review: three turns, one key press each
    page.get_by_role("link", name="Review", exact=True).click()
    page.get_by_role("button", name="Review").first.click()
    item = page.locator("#review-item .review-item")
    sync_api.expect(item).to_have_attribute("data-pos", "0")
    size = int(item.get_attribute("data-size"))
    assert size >= 3
    labelled = []
    for position, key in enumerate("cxu"):
        labelled.append((item.get_attribute("data-dialogue"), item.get_attribute("data-turn")))
        page.keyboard.press(key)
        if position + 1 < size:
            sync_api.expect(item).to_have_attribute("data-pos", str(position + 1))
    saves = page.evaluate("window.dstReview.saves")
    assert len(saves) == 3 and all(ms < 1000 for ms in saves)
    assert len(set(labelled)) == 3

    # agreement grows: alice and carol on the three turns, then judge vs human
    panel = page.locator("#agreement")
    sync_api.expect(panel.locator("#inter-annotator")).to_contain_text("alice · carol")
    sync_api.expect(panel.locator("#inter-annotator tbody td").first).to_have_text("2")
    sync_api.expect(panel.locator("#vs-human")).to_contain_text("judge vs human",
                                                                 timeout=30_000)
    sync_api.expect(panel.locator(".agreement")).to_have_attribute("data-updating", "false",
                                                                   timeout=30_000)
    service = live.service
    stored = service.labels.list(service.tokens.resolve_token(alice).project_id,
                                 subject=service.labels.subject_of_job(
                                     service.tokens.resolve_token(alice).project_id, job_id),
                                 reviewer="alice")
    assert sorted(i["label"] for i in stored) == ["correct", "incorrect", "unsure"]

    # export the labels and read them back with dst-judge agreement
    with page.expect_download() as download:
        page.get_by_role("link", name="Export labels (JSONL)").click()
    labels = tmp_path / "labels.jsonl"
    download.value.save_as(labels)
    records = [json.loads(line) for line in labels.read_text().splitlines()]
    assert {r.get("reviewer") or r.get("annotator") for r in records} == {"alice", "carol"}
    with live.api(alice) as api:
        data = api.get(f"/v1/jobs/{job_id}/export").content
    run = tmp_path / "run"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(run, filter="data")
    env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "judge", "agreement", str(run), "--human",
                           str(labels), "--n-boot", "50"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "judge vs human" in done.stdout, done.stdout
    assert "Accuracy after human re-evaluation" in done.stdout
    assert set(load_labels(labels).annotators) == {"alice", "carol"}
    watched.clean()


def test_hostile_text_slot_and_system_names_stay_inert(watched, live):
    alice = live.token("mallory-viewer", "read,submit,review")
    job_id = live.import_bundle(alice, bundle(synthetic_rows(40, seed=9, hostile=True),
                                              system=XSS))
    page = log_in(watched, live, alice)
    sync_api.expect(page.locator("table.runs")).to_contain_text(XSS)
    page.goto(f"{live.url}/ui/runs/{job_id}")
    sync_api.expect(page.locator("table.turns")).to_contain_text(XSS)
    page.locator("table.turns a").first.click()
    dialogue = page.locator("ol.dialogue")
    sync_api.expect(dialogue).to_contain_text(XSS)
    sync_api.expect(dialogue).to_contain_text(XSS_LINK)
    sync_api.expect(page.locator("table.states").first).to_contain_text("onerror=")
    assert page.locator("a[href^='javascript:' i]").count() == 0
    assert page.locator("ol.dialogue a, ol.dialogue img, ol.dialogue script").count() == 0
    page.goto(f"{live.url}/ui/review/{job_id}?queue=sample&n=10")
    page.get_by_role("button", name="Draw a random sample").click()
    sync_api.expect(page.locator("#review-item .review-item")).to_have_attribute("data-pos",
                                                                                 "0")
    page.keyboard.press("c")
    sync_api.expect(page.locator(".save-status")).to_contain_text("Saved")
    page.goto(f"{live.url}/ui/compare?run={job_id}")
    sync_api.expect(page.locator("table.sortable").first).to_contain_text(XSS)
    watched.clean()


def test_controls_are_labelled_and_focus_starts_at_the_skip_link(watched, live):
    token = live.token("ada", "read,submit,review")
    job_id = live.import_bundle(token, bundle(synthetic_rows(60, seed=2)))
    page = log_in(watched, live, token)
    unlabelled_js = """() => Array.from(document.querySelectorAll(
        'input:not([type=hidden]), select, textarea, button')).filter(el => {
          if (el.closest('[hidden]') || el.offsetParent === null) return false;
          const named = (el.labels && el.labels.length) || el.getAttribute('aria-label')
            || el.getAttribute('aria-labelledby') || (el.tagName === 'BUTTON'
            && el.textContent.trim());
          return !named; }).map(el => el.outerHTML.slice(0, 80))"""
    for path in ("/ui/", "/ui/runs/new", f"/ui/runs/{job_id}", f"/ui/review/{job_id}",
                 f"/ui/compare?run={job_id}", "/ui/review"):
        page.goto(live.url + path)
        assert page.evaluate(unlabelled_js) == [], path
        assert page.locator("h1").count() == 1, path
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip", path
    watched.clean()


BUTTONS_IN_PLACE_JS = """() => {
  const side = document.querySelector('.side');
  const found = Array.from(document.querySelectorAll(
      'button, a.button, input[type=submit], input[type=button]')).filter(e =>
    e.getClientRects().length && !e.closest('details:not([open])')
    && getComputedStyle(e).visibility !== 'hidden');
  const problems = [];
  for (const e of found) {
    const name = (e.getAttribute('aria-label') || e.textContent || e.value || '').trim()
      .replace(/\\s+/g, ' ').slice(0, 40);
    // bring it into view vertically only: a button pushed off sideways must stay off
    const before = e.getBoundingClientRect();
    window.scrollTo(0, window.scrollY + before.top - innerHeight / 2);
    const r = e.getBoundingClientRect();
    if (r.left < -0.5 || r.right > innerWidth + 0.5)
      problems.push(`${name}: x ${Math.round(r.left)}..${Math.round(r.right)}`
                    + ` leaves 0..${innerWidth}`);
    if (side && !side.contains(e)) {
      const s = side.getBoundingClientRect();
      if (r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom)
        problems.push(`${name}: under the sidebar`);
    }
    const x = Math.min(Math.max((r.left + r.right) / 2, 0), innerWidth - 1);
    const hit = document.elementFromPoint(x, (r.top + r.bottom) / 2);
    if (!hit || !(hit === e || e.contains(hit)))
      problems.push(`${name}: covered by ${hit ? hit.tagName + '.' + hit.className : 'nothing'}`);
  }
  return {count: found.length, problems,
          overflow: document.documentElement.scrollWidth - innerWidth};
}"""


@pytest.mark.parametrize("width", [1280, 768, 375])
def test_buttons_of_the_review_and_run_pages_are_on_screen_and_clear_of_the_sidebar(
        browser, live, width):
    """Every button of the review and run pages lies inside the viewport, off the agreement
    sidebar, and is what a click at its centre reaches; the page never scrolls sideways.
    Labels saved with the mouse and the keyboard show in the panel's counts at once."""
    token = live.token(f"layout-{width}", "read,submit,review", project=f"layout{width}")
    job_id = live.import_bundle(token, bundle(
        synthetic_rows(60, seed=5), system="a-system-with-a-rather-long-name-for-layout",
        predictions_sha256=f"{width:064d}"))
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    watched = Watched(page, live.url)
    try:
        log_in(watched, live, token)
        for path in (f"/ui/review/{job_id}", f"/ui/runs/{job_id}"):
            page.goto(live.url + path)
            placed = page.evaluate(BUTTONS_IN_PLACE_JS)
            assert placed["count"] >= 3, (width, path, placed)
            assert placed["problems"] == [], (width, path, placed["problems"])
            assert placed["overflow"] <= 0, (width, path, "the page scrolls sideways")
        assert page.get_by_role("link", name="Bundle (.tar.gz)").is_visible()

        page.goto(f"{live.url}/ui/review/{job_id}")
        item = page.locator("#review-item .review-item")
        slot = page.locator("#review-item table.states tr[data-slot]").first
        slot_name = slot.get_attribute("data-slot")
        # a real click (Playwright refuses when another element would receive it)
        slot.locator("button[data-label=incorrect]").click(timeout=5_000)
        sync_api.expect(page.locator(".save-status")).to_contain_text(
            f"Saved incorrect for {slot_name}")
        slot.locator("button[data-label=unsure]").click(timeout=5_000)
        sync_api.expect(page.locator(".save-status")).to_contain_text(
            f"Saved unsure for {slot_name}")
        for position, key in enumerate("xcu"):
            sync_api.expect(item).to_have_attribute("data-pos", str(position))
            page.keyboard.press(key)
            sync_api.expect(page.locator(".save-status")).to_contain_text("Saved")
        counts = page.locator("#agreement .counts")
        sync_api.expect(counts).to_contain_text("4 labels on 3 turns by 1 reviewer; "
                                                "yours: 3 turns, 1 slot.", timeout=10_000)
        placed = page.evaluate(BUTTONS_IN_PLACE_JS)
        assert placed["problems"] == [] and placed["overflow"] <= 0, (width, placed)
        watched.clean()
    finally:
        context.close()


def test_review_sample_is_random_and_the_panel_states_what_the_estimates_leave_out(watched,
                                                                                    live):
    """The sample queue is drawn with the page's button (opening it draws nothing) and says it
    is the run's estimate sample, labelled blind; once labelled it is fixed (the page says
    so), and the panel shows the labelled, unlabelled, tied and unsure counts and
    the bounds beside the estimates (issue 34, items 5 and 7)."""
    token = live.token("sam", "read,submit,review", project="samples")
    other = live.token("tess", "review", project="samples")
    job_id = live.import_bundle(token, bundle(synthetic_rows(60, seed=4)))
    page = log_in(watched, live, token)
    page.goto(f"{live.url}/ui/review/{job_id}?queue=sample&n=8&seed=2")
    note = page.locator("#sample-note")
    sync_api.expect(note).to_contain_text("no estimate sample is drawn yet")
    page.get_by_role("button", name="Draw a random sample").click()
    sync_api.expect(note).to_contain_text("Random sample of 8 (seed 2)")
    sync_api.expect(note).to_contain_text("estimate sample (not fixed until a label)")
    item = page.locator("#review-item .review-item")
    # labelled blind: the page says so and shows no verdict or gold
    sync_api.expect(item).to_have_attribute("data-blind", "true")
    sync_api.expect(page.locator("#blind-note")).to_contain_text("Blind labelling")
    assert page.locator("#review-item dl.verdicts").count() == 0
    labelled = []
    for position, key in enumerate("cccc"):
        sync_api.expect(item).to_have_attribute("data-pos", str(position))
        labelled.append((item.get_attribute("data-dialogue"),
                         int(item.get_attribute("data-turn"))))
        page.keyboard.press(key)
    sync_api.expect(item).to_have_attribute("data-pos", "4")
    unsure = (item.get_attribute("data-dialogue"), int(item.get_attribute("data-turn")))
    with live.api(other) as api:  # tess splits with sam on two turns, is unsure of a fifth
        for (dialogue_id, turn_index), label in ((labelled[0], "incorrect"),
                                                 (labelled[1], "incorrect"),
                                                 (unsure, "unsure")):
            done = api.put("/v1/labels", json={"dialogue_id": dialogue_id,
                                               "turn_index": turn_index, "label": label,
                                               "job_id": job_id})
            assert done.status_code == 200, done.text
        given = api.get(f"/v1/labels?job_id={job_id}").json()["labels"]
    assert sorted((i["reviewer"], i["blind"]) for i in given) == [("sam", True)] * 4 + [
        ("tess", None)] * 3  # the page's labels say they were given blind; the API's do not
    page.reload()
    sync_api.expect(note).to_contain_text("fixed: a turn of it has a label")
    notes = page.locator("#agreement #estimate-notes")
    sync_api.expect(notes).to_contain_text(
        "2 labelled, 3 unlabelled, 2 tied (reviewers split), 1 unsure", timeout=30_000)
    sync_api.expect(notes).to_contain_text("if every such turn were wrong")
    # another draw is a separate sample and says so
    page.goto(f"{live.url}/ui/review/{job_id}?queue=sample&n=9&seed=3")
    sync_api.expect(note).to_contain_text("drawing this one makes a separate sample")
    page.get_by_role("button", name="Draw a random sample").click()
    sync_api.expect(note).to_contain_text("a separate sample")
    watched.clean()


FITS_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const scrolled = (e) => { for (let p = e.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') return true; }
    return false; };
  const outside = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    // a box inside its own scrolling region (a wide table or chart) scrolls there
    if (!r.width || e.closest('.skip, .sr') || scrolled(e)) continue;
    if (r.left < -0.5 || r.right > vw + 0.5)
      outside.push(`${e.tagName}.${e.className}#${e.id}: ${Math.round(r.left)}..`
                   + `${Math.round(r.right)}`);
  }
  const fonts = Array.from(document.querySelectorAll('svg.bars text'))
    .filter(t => t.getClientRects().length)
    .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {overflow: document.documentElement.scrollWidth - vw, outside: outside.slice(0, 8),
          selects: document.querySelectorAll('main select').length,
          labels: fonts.length, smallest: fonts.length ? Math.min(...fonts) : null};
}"""


@pytest.mark.parametrize("width", [1280, 768, 375])
def test_the_new_evaluation_form_and_the_compare_page_fit_the_screen(browser, live, width):
    """With long file and system names, the form's file selects and the compare page's run
    list stay inside the viewport, the page never scrolls sideways, and chart labels stay
    readable (a chart wider than a phone scrolls in its own box instead of shrinking)."""
    token = live.token(f"fit-{width}", "read,submit,review", project=f"fit{width}")
    runs = [live.import_bundle(token, bundle(
        synthetic_rows(40, seed=n), system=f"a-system-with-a-rather-long-name-number-{n}",
        predictions_sha256=f"{width + n:064d}")) for n in (1, 2, 3)]
    with live.api(token) as client:
        for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                           ("predictions", "predictions.jsonl")):
            with (EXAMPLES / name).open("rb") as handle:
                client.post("/v1/files", data={"kind": kind,
                                               "name": f"a-rather-long-upload-name-{name}"},
                            files={"file": (name, handle)}).raise_for_status()
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    watched = Watched(page, live.url)
    try:
        log_in(watched, live, token)
        page.goto(live.url + "/ui/runs/new")
        sync_api.expect(page.locator("#predictions_id")).to_contain_text("a-rather-long-upload")
        fit = page.evaluate(FITS_JS)
        assert fit["selects"] >= 4, fit
        assert fit["overflow"] <= 0 and fit["outside"] == [], (width, "form", fit)
        page.goto(live.url + "/ui/compare?" + "&".join(f"run={r}" for r in runs))
        sync_api.expect(page.locator(".pick")).to_contain_text("number-3")
        fit = page.evaluate(FITS_JS)
        assert fit["overflow"] <= 0 and fit["outside"] == [], (width, "compare", fit)
        assert fit["labels"] >= 10 and fit["smallest"] >= 10, (width, "chart labels", fit)
        watched.clean()
    finally:
        context.close()
