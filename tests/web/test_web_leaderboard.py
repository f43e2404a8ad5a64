"""The leaderboard page: every system with its intervals, the forest plot and the pairwise
matrix of the chosen metric, links from a judge run to its run page; another project's
session gets 404 for it; the page is a GET that writes nothing."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from judge.web._leaderboard import forest, matrix
from tests.conftest import EXAMPLES

from .conftest import Browserless


def _leaderboard(web: dict[str, Any], *, run: bool = False) -> tuple[str, list[str]]:
    """A finished leaderboard job of project 'lab' over the two example predictions files
    (and, with ``run``, a judge run of the first); returns its id and the systems' ids."""
    api = Browserless(web["app"])
    auth = {"Authorization": f"Bearer {web['tokens']['alice']}"}

    def upload(kind: str, name: str) -> str:
        response = api.post("/v1/files", data={"kind": kind}, headers=auth,
                            files={"file": (name, (EXAMPLES / name).read_bytes())})
        return str(response.json()["id"])

    def wait(job_id: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = api.get(f"/v1/jobs/{job_id}", headers=auth).json()["status"]
            if status not in ("queued", "running"):
                assert status == "succeeded", api.get(f"/v1/jobs/{job_id}", headers=auth).json()
                return
            time.sleep(0.05)
        raise AssertionError("the job did not finish")

    try:
        files = {k: upload(k, n) for k, n in (("schema", "schema.json"),
                                               ("dialogues", "dialogues.jsonl"),
                                               ("predictions", "predictions.jsonl"))}
        systems = [files["predictions"], upload("predictions", "predictions-weak.jsonl")]
        if run:
            job = api.post("/v1/jobs", headers=auth, json={
                "kind": "evaluate", "inputs": files, "options": {"model": "fake-model"}})
            wait(job.json()["id"])
            systems.append(job.json()["id"])
        job = api.post("/v1/jobs", headers=auth, json={
            "kind": "leaderboard", "inputs": {"systems": systems, "schema": files["schema"],
                                              "dialogues": files["dialogues"]},
            "options": {"gold": ["2.1", "2.4"]}})
        assert job.status_code == 201, job.text
        wait(job.json()["id"])
        return str(job.json()["id"]), systems
    finally:
        api.close()


def _api(web: dict[str, Any], url: str) -> Any:
    api = Browserless(web["app"])
    try:
        response = api.get(url, headers={"Authorization": f"Bearer {web['tokens']['alice']}"})
        assert response.status_code == 200, response.text
        return response.json()
    finally:
        api.close()


def test_the_page_shows_systems_intervals_and_the_matrix(web):
    job, systems = _leaderboard(web, run=True)
    alice = web["client"]()
    alice.login(web["tokens"]["alice"])
    page = alice.get(f"/ui/leaderboards/{job}")
    assert page.status_code == 200, page.text[:500]
    html = page.text
    board = _api(web, f"/v1/jobs/{job}/results")
    names = [s["name"] for s in board["systems"]]
    assert len(names) == 3
    for name in names:
        assert f'data-system="{name}"' in html
    # a judge run links to its run page; a predictions file has no run page
    assert f'href="/ui/runs/{systems[2]}"' in html
    assert f'href="/ui/runs/{systems[0]}"' not in html
    # each figure and its interval, as the job computed them
    top = board["systems"][0]["metrics"]["jga@2.1"]
    assert f"{top['value']:.2f}" in html and f"[{top['ci'][0]:.2f}, {top['ci'][1]:.2f}]" in html
    assert html.count('<g class="interval"') == 3
    assert len(re.findall(r"<td class=\"(?:win|loss|tie)\"", html)) == 6  # 3 x 3, off the diagonal
    # another metric by the query parameter: its own drawing and matrix
    other = alice.get(f"/ui/leaderboards/{job}", params={"metric": "sa@2.4"}).text
    assert "Intervals, slot accuracy 2.4" in other and "Pairwise, slot accuracy 2.4" in other
    assert alice.get(f"/ui/leaderboards/{systems[2]}").status_code == 404  # a judge run
    listed = alice.get("/ui/leaderboards").text
    assert f"/ui/leaderboards/{job}" in listed


def test_another_project_gets_404_and_a_get_writes_nothing(web):
    job, _ = _leaderboard(web)
    eve = web["client"]()
    eve.login(web["tokens"]["eve"])
    assert eve.get(f"/ui/leaderboards/{job}").status_code == 404
    assert job not in eve.get("/ui/leaderboards").text
    alice = web["client"]()
    alice.login(web["tokens"]["alice"])
    before = _api(web, f"/v1/jobs/{job}")
    assert alice.get(f"/ui/leaderboards/{job}").status_code == 200
    assert _api(web, f"/v1/jobs/{job}") == before
    assert alice.get("/ui/leaderboards/job_0000000000000000").status_code == 404


def _board(values: dict[str, tuple[float, float, float]]) -> list[dict[str, Any]]:
    return [{"name": n, "metrics": {"jga": {"value": v, "ci": [lo, hi]}}}
            for n, (v, lo, hi) in values.items()]


def test_forest_positions_follow_the_values():
    drawn = forest(_board({"a": (40.0, 38.0, 42.0), "b": (30.0, 27.0, 33.0)}), "jga")
    assert drawn is not None
    a, b = drawn["rows"]
    assert b["x_low"] < b["x"] < b["x_high"] < a["x_low"] < a["x"] < a["x_high"]
    assert a["x"] - a["x_low"] == pytest.approx(a["x_high"] - a["x"])
    assert drawn["low"] <= 27.0 and drawn["high"] >= 42.0


def test_matrix_signs_and_verdicts():
    systems = _board({"a": (40, 38, 42), "b": (30, 27, 33), "c": (29, 26, 32)})
    pairs = [{"a": "a", "b": "b", "metric": "jga", "difference": 10.0, "ci": [6.0, 14.0],
              "p_adjusted": 0.001, "significant": True},
             {"a": "b", "b": "c", "metric": "jga", "difference": 1.0, "ci": [-1.0, 3.0],
              "p_adjusted": 0.4, "significant": False}]
    rows = {r["name"]: r["cells"] for r in matrix(systems, pairs, "jga")}
    assert rows["a"][1]["verdict"] == "win" and rows["b"][0]["verdict"] == "loss"
    assert rows["b"][0]["difference"] == -10.0 and rows["b"][0]["ci"] == [-14.0, -6.0]
    assert rows["b"][2]["verdict"] == "tie" and rows["c"][1]["verdict"] == "tie"
    assert rows["a"][0] is None and rows["a"][2] is None  # itself; a pair not given
