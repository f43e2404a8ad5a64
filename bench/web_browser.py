"""Browser figures of the web interface on a full-test-set-sized run (7,368 turns).

A synthetic judge run shaped like the pipeline's (dialogues, two annotation versions, two
calls with replies, traces; ~20 MB of judgment rows) is imported into a live server, then
headless Chromium (Debian's /usr/bin/chromium through Playwright) measures:

* first paint of the run page (the browser's first-contentful-paint, from navigation start),
  cold (the run's index not built yet) and warm, plus a later page, a filtered view and a
  turn's deep link;
* labelling: one key press per turn on the review page — the save's round trip (fetch to
  response, in the page) and key press to the next turn on screen.

    PYTHONPATH=$PWD python3 bench/web_browser.py [--turns 7368] [--labels 30] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from _common import local_only, write_results  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.fault_server import FaultConfig, FaultServer  # noqa: E402
from tests.web.live import LiveServer  # noqa: E402
from tests.web.synthetic import bundle, synthetic_rows  # noqa: E402

PAINT = """() => new Promise(done => {
  const read = () => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    if (fcp && nav && nav.domContentLoadedEventEnd > 0) {
      done({fcp: fcp.startTime, ttfb: nav.responseStart, html: nav.responseEnd,
            dcl: nav.domContentLoadedEventEnd, bytes: nav.transferSize});
    } else { setTimeout(read, 20); }
  };
  read();
})"""
WATCH = """() => {
  window.__marks = [];
  document.addEventListener('keydown', () => { window.__down = performance.now(); }, true);
  new MutationObserver(() => {
    if (window.__down !== undefined) {
      window.__marks.push(performance.now() - window.__down);
      window.__down = undefined;
    }
  }).observe(document.getElementById('review-item'), {childList: true});
}"""


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0.0


def paint(page, url: str) -> dict:
    page.goto(url)
    return page.evaluate(PAINT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=7368)
    parser.add_argument("--labels", type=int, default=30, help="turns labelled by key press")
    parser.add_argument("--repeat", type=int, default=5, help="paint measurements per case")
    args = parser.parse_args()
    local_only()
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    rows = synthetic_rows(args.turns, seed=11)
    data = bundle(rows)
    print(f"synthetic run: {len(rows)} turns, "
          f"{len({r['dialogue_id'] for r in rows})} dialogues, bundle {len(data) / 1e6:.1f} MB "
          f"({time.perf_counter() - started:.1f} s to make)")
    with tempfile.TemporaryDirectory() as folder, \
            FaultServer(FaultConfig(latency=0.0)) as model, \
            LiveServer(Path(folder) / "data", model.url, job_slots=0) as live:
        token = live.token("bench", "read,submit,review")
        began = time.perf_counter()
        job_id = live.import_bundle(token, data)
        print(f"imported in {time.perf_counter() - began:.1f} s as {job_id}")
        web = live.app.state.web
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                 args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1360, "height": 900}).new_page()
            page.goto(live.url + "/ui/login")
            page.get_by_label("Token").fill(token)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_selector("table.runs")
            base = f"{live.url}/ui/runs/{job_id}"
            paint(page, live.url + "/ui/")  # warm the browser's cache of app.js / style.css
            cases: dict[str, list[dict]] = {"cold": [], "warm": [], "page 100": [],
                                            "filtered": [], "turn": []}
            for _ in range(args.repeat):
                web.index.items.clear()
                cases["cold"].append(paint(page, base))
                row = live.service.jobs.row(live.service.tokens.resolve_token(token)
                                            .project_id, job_id)
                built = time.perf_counter()
                web.index.get(row)
                index_s = time.perf_counter() - built
                cases["warm"].append(paint(page, base))
                cases["page 100"].append(paint(page, base + "?page=100"))
                cases["filtered"].append(paint(page, base + "?verdict=incorrect&domain=hotel"
                                               "&q=cambridge"))
                cases["turn"].append(paint(page, f"{base}/turns/SYN00500.json/2"))
            count = page.goto(base)
            count = page.locator("#match-count").inner_text()
            print(f"\nrun page of {count} turns, first paint (first-contentful-paint from "
                  f"navigation start), median of {args.repeat} [max]:")
            for name, values in cases.items():
                fcp = [v["fcp"] for v in values]
                html = [v["html"] for v in values]
                print(f"  {name:9s} {median(fcp):7.0f} ms [{max(fcp):5.0f}]   HTML received "
                      f"{median(html):5.0f} ms   {values[0]['bytes'] / 1024:6.0f} KB")
            print(f"  (index of the run, built in the background after a cold paint: "
                  f"{index_s:.2f} s)")

            page.goto(f"{live.url}/ui/review/{job_id}?queue=disagreements")
            page.wait_for_selector("#review-item .review-item")
            page.evaluate(WATCH)
            item = page.locator("#review-item .review-item")
            size = int(item.get_attribute("data-size"))
            labelled = min(args.labels, size - 1)
            for position in range(labelled):
                page.keyboard.press("cx"[position % 2])
                page.wait_for_function(
                    f"() => document.querySelector('#review-item .review-item')"
                    f".dataset.pos === '{position + 1}'")
            saves = page.evaluate("window.dstReview.saves")
            shown = page.evaluate("window.__marks")
            project_id = live.service.tokens.resolve_token(token).project_id
            stored = len(live.service.labels.list(project_id, subject=live.service.labels
                                                  .subject_of_job(project_id, job_id)))
            print(f"\nlabelling on the review page ({size} turns in the queue): "
                  f"{labelled} turns, one key press each, {stored} labels stored")
            print(f"  save (POST to response)     median {median(saves):5.1f} ms   "
                  f"p95 {p95(saves):5.1f} ms   max {max(saves):5.1f} ms")
            print(f"  key press -> next turn shown median {median(shown):5.1f} ms   "
                  f"p95 {p95(shown):5.1f} ms   max {max(shown):5.1f} ms")
            page.wait_for_function(
                "() => { const a = document.querySelector('#agreement .agreement');"
                f" return a.dataset.labels === '{stored}' && a.dataset.updating === 'false'; }}",
                timeout=60_000)
            computed = web.agreement.results[job_id]
            print(f"  agreement with the labels, recomputed in the background: "
                  f"{computed.seconds:.2f} s ({len(rows)} turns, {computed.human_turns} "
                  f"human-labelled)")
            browser.close()
    labels = {"cold": "first visit (the run's index not built yet)",
              "warm": f"again (index built: {index_s:.1f} s in the background)",
              "page 100": "page 100", "filtered": "filtered by verdict, domain and text",
              "turn": "a turn's deep link"}
    write_results("web_browser", [{
        "title": (f"First paint of the run page of a {len(rows):,}-turn run "
                  f"(first-contentful-paint from navigation start, {args.repeat} visits)"),
        "columns": ["page", "median (ms)", "max (ms)", "HTML received, median (ms)"],
        "rows": [[labels[name], f"{median([v['fcp'] for v in values]):.0f}",
                  f"{max(v['fcp'] for v in values):.0f}",
                  f"{median([v['html'] for v in values]):.0f}"]
                 for name, values in cases.items()],
    }, {
        "title": f"Labelling {labelled} turns on the review page, one key press each",
        "columns": ["", "median (ms)", "p95 (ms)", "max (ms)"],
        "rows": [[label, f"{median(values):.1f}", f"{p95(values):.1f}", f"{max(values):.1f}"]
                 for label, values in (("save (request to response)", saves),
                                       ("key press to the next turn on screen", shown))],
        "note": (f"Agreement with the {stored} labels on the {len(rows):,}-turn run was "
                 f"recomputed in {computed.seconds:.2f} s, in the background."),
    }], turns=len(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
