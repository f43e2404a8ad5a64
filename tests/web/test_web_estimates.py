"""The review panel's estimates, and the review sample kept in the project's file store (so
every replica, and a restarted one, estimates from the same sample)."""

from __future__ import annotations

import time
from typing import Any

from judge.web._agreement import AgreementBoard, sample_name, stored_sample

from .conftest import draw_form


def _label(client: Any, csrf: str, job_id: str, **body: Any) -> Any:
    return client.post(f"/ui/review/{job_id}/labels", json=body,
                       headers={"X-CSRF-Token": csrf, "Accept": "application/json"})


def test_review_sample_is_stored_and_the_panel_shows_the_estimates(web, synthetic_run):
    client = web["client"]()
    csrf = client.login(web["tokens"]["alice"])
    page = draw_form(client, csrf, synthetic_run, 12, 4)
    assert page.status_code == 200
    service = web["service"]
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    stored = [f for f in service.files.list(project, kind="sample")
              if f["name"] == sample_name(synthetic_run)]
    assert len(stored) == 1 and stored[0]["info"]["drawn_turns"] == 12
    # a fresh board (another replica, or this one after a restart) finds the same sample
    file_id, sample = stored_sample(service, project, synthetic_run)
    assert file_id == stored[0]["id"] and len(sample.turns) == 12
    for turn in sample.turns:
        assert _label(client, csrf, synthetic_run, dialogue_id=turn.dialogue_id,
                      turn_index=turn.turn_index, label="correct").status_code == 200
    deadline = time.monotonic() + 30
    while True:
        html = client.get(f"/ui/review/{synthetic_run}/agreement").text
        if 'data-updating="false"' in html and "Estimates of TSA" in html:
            break
        assert time.monotonic() < deadline, html
        time.sleep(0.1)
    assert "no interval can cover the judge" in html and "ppi" in html
    board = AgreementBoard(service)
    try:
        assert stored_sample(board.service, project, synthetic_run)[0] == file_id
    finally:
        board.close()


def test_identical_samples_of_two_runs_are_one_file_referenced_by_each_run(web, synthetic_run):
    from judge.web._agreement import store_sample
    from judge.web._index import build_index
    from judge.web._queues import draw

    from .synthetic import synthetic_rows

    service = web["service"]
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    sample = draw(build_index("j", None, iter(synthetic_rows(160, seed=3)), {}), 10, seed=1)
    store_sample(service, project, "job_first", sample)
    store_sample(service, project, "job_second", sample)  # byte-identical content
    first, second = (stored_sample(service, project, j) for j in ("job_first", "job_second"))
    assert first[0] == second[0] and first[0] is not None
    assert first[1].turns == second[1].turns == sample.turns
    assert [f["name"] for f in service.files.list(project, kind="sample")] == [
        sample_name("job_first")]
