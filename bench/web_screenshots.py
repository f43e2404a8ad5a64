"""Screenshots of the web interface's main pages for the README (docs/screenshots/*.png).

Starts the service with the fake model server (tests/fault_server.py) on 127.0.0.1, judges the
example's two systems and a one-prompt method, lets two reviewers label a few turns, keeps one
slow run going (so the runs page shows live progress), and photographs the pages in headless
Chromium (Debian's /usr/bin/chromium through Playwright).

    PYTHONPATH=$PWD python3 bench/web_screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from _common import local_only  # noqa: E402

from tests.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.fault_server import FaultConfig, FaultServer  # noqa: E402
from tests.web.live import LiveServer  # noqa: E402

EXAMPLES = ROOT / "examples"


def upload(api, path: Path, kind: str) -> str:
    response = api.post("/v1/files", data={"kind": kind},
                        files={"file": (path.name, path.read_bytes())})
    response.raise_for_status()
    return str(response.json()["id"])


def wait(api, job_id: str) -> dict:
    while True:
        job = api.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    local_only()
    from playwright.sync_api import sync_playwright

    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        model = stack.enter_context(
            FaultServer(FaultConfig(latency=0.02, rates={"refusal": 0.05}, seed=4)))
        slow_model = stack.enter_context(FaultServer(FaultConfig(latency=1.5)))
        endpoints = {"fake": {"base_url": model.url, "api_key": "sk-x",
                              "default_model": "gpt-4o-mini"},
                     "slow": {"base_url": slow_model.url, "api_key": "sk-x",
                              "default_model": "gpt-4o-mini"}}
        with LiveServer(Path(folder) / "data", model.url, endpoints=endpoints) as live:
            token = live.token("ana", "read,submit,review")
            ben = live.token("ben", "review")
            with live.api(token) as api:
                schema = upload(api, EXAMPLES / "schema.json", "schema")
                dialogues = upload(api, EXAMPLES / "dialogues.jsonl", "dialogues")
                jobs = []
                for name, method in (("predictions.jsonl", "two-dim"),
                                     ("predictions-weak.jsonl", "two-dim"),
                                     ("predictions.jsonl", "direct")):
                    predictions = upload(api, EXAMPLES / name, "predictions")
                    body = {"kind": "evaluate", "options": {"method": method},
                            "inputs": {"schema": schema, "dialogues": dialogues,
                                       "predictions": predictions}}
                    jobs.append(api.post("/v1/jobs", json=body).json()["id"])
                for job_id in jobs:
                    wait(api, job_id)
                main_job = jobs[0]
                turns = [(d, t) for d, t in (("EX001.json", 1), ("EX002.json", 0),
                                              ("EX003.json", 1), ("EX004.json", 2))]
                for who, labels in ((token, ("correct", "incorrect", "correct", "incorrect")),
                                    (ben, ("correct", "incorrect", "incorrect", "incorrect"))):
                    with live.api(who) as reviewer:
                        for (dialogue_id, turn), label in zip(turns, labels, strict=True):
                            reviewer.put("/v1/labels", json={
                                "dialogue_id": dialogue_id, "turn_index": turn,
                                "label": label, "job_id": main_job})
                slow = upload(api, EXAMPLES / "predictions-weak.jsonl", "predictions")
                api.post("/v1/jobs", json={
                    "kind": "evaluate", "options": {"endpoint": "slow", "concurrency": 1},
                    "inputs": {"schema": schema, "dialogues": dialogues, "predictions": slow}})
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                     args=CHROMIUM_ARGS)
                page = browser.new_context(viewport={"width": 1360, "height": 860},
                                           device_scale_factor=1).new_page()
                page.goto(live.url + "/ui/login")
                page.screenshot(path=str(out / "login.png"))
                page.get_by_label("Token").fill(token)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_selector("table.runs")
                time.sleep(3.5)  # the slow run is under way
                page.screenshot(path=str(out / "runs.png"))
                page.goto(f"{live.url}/ui/runs/{main_job}")
                page.wait_for_selector("table.turns")
                page.screenshot(path=str(out / "run.png"), full_page=True)
                page.goto(f"{live.url}/ui/runs/{main_job}/turns/EX004.json/2")
                page.screenshot(path=str(out / "turn.png"), full_page=True)
                page.goto(f"{live.url}/ui/compare?" + "&".join(f"run={j}" for j in jobs))
                page.wait_for_selector("figure.chart")
                page.screenshot(path=str(out / "compare.png"), full_page=True)
                page.goto(f"{live.url}/ui/review/{main_job}?queue=disagreements&pos=0")
                page.wait_for_selector("#vs-human", timeout=30_000)
                page.screenshot(path=str(out / "review.png"))
                page.goto(f"{live.url}/ui/runs/new")
                for kind in ("schema", "dialogues", "predictions"):
                    page.locator(f"#{kind}_id").select_option(index=1)
                page.locator("#f-method").select_option("two-dim-cot")
                page.locator("#f-top_p").fill("0")
                page.get_by_role("button", name="Submit evaluation").click()
                page.wait_for_selector("#error-summary")
                page.screenshot(path=str(out / "submit.png"))
                browser.close()
    for path in sorted(out.glob("*.png")):
        print(f"{path}  {path.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
