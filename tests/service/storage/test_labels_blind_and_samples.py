"""The API's side of issue 42, items 5 and 6: a label says whether it was given blind (kept,
listed and exported in the labels file with the predictions' digest; labels recorded before
migration 0008 read as not said), and a file that is a run's review sample cannot be deleted
while the run references it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from judge.service import Database, create_token
from judge.service.db._migrate import alembic_config
from judge.web import mount_web
from tests.app_surface import web_login
from tests.service.conftest import Api, running_service, service_settings
from tests.web.synthetic import bundle, synthetic_rows

DIGEST = "7" * 64


@pytest.fixture
def api(tmp_path: Path, fake_model: Any) -> Iterator[dict[str, Any]]:
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0)
    with running_service(settings) as (service, app):
        mount_web(app)
        token = create_token(service.db, "lab", "admin", name="ana")[0]
        client = Api(app, token)
        browser = Api(app)
        try:
            made = client.post("/v1/bundles", files={"file": ("run.tar.gz", bundle(
                synthetic_rows(30, seed=2), predictions_sha256=DIGEST))})
            assert made.status_code == 201, made.text
            yield {"client": client, "browser": browser, "token": token,
                   "job": made.json()["id"], "service": service}
        finally:
            client.close()
            browser.close()


def test_a_label_keeps_whether_it_was_given_blind_and_the_labels_file_says_so(api):
    client, job = api["client"], api["job"]
    for turn, blind in ((0, True), (1, False), (2, None)):
        body = {"dialogue_id": "SYN00001.json", "turn_index": turn, "label": "correct",
                "job_id": job, **({} if blind is None else {"blind": blind})}
        answer = client.put("/v1/labels", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["blind"] is blind
    listed = client.get(f"/v1/labels?job_id={job}").json()["labels"]
    assert [i["blind"] for i in sorted(listed, key=lambda i: i["turn_index"])] == [
        True, False, None]
    text = client.get(f"/v1/labels?job_id={job}&format=labels").text
    records = sorted(map(json.loads, text.splitlines()), key=lambda r: r["turn_index"])
    assert [r.get("blind") for r in records] == [True, False, None]
    assert {r["predictions_sha256"] for r in records} == {DIGEST}
    refused = client.put("/v1/labels", json={"dialogue_id": "SYN00001.json", "turn_index": 3,
                                             "label": "correct", "job_id": job,
                                             "blind": "yes"})
    assert refused.status_code == 422


def test_a_runs_review_sample_cannot_be_deleted(api):
    browser, job = api["browser"], api["job"]
    csrf = web_login(browser, api["token"])
    drawn = browser.post(f"/ui/review/{job}/sample", data={"n": "5", "seed": "2",
                                                           "csrf": csrf})
    assert drawn.status_code == 303, drawn.text
    project = api["service"].tokens.resolve_token(api["token"]).project_id
    found = api["service"].samples.get(project, job)
    assert found is not None
    refused = api["client"].delete(f"/v1/files/{found['file_id']}")
    assert refused.status_code == 409 and f"review sample of run {job}" in refused.text
    # a draw refused for a bad size stores nothing
    bad = browser.post(f"/ui/review/{job}/sample", data={"n": "0", "seed": "2", "csrf": csrf},
                       headers={"Accept": "application/json"})
    assert bad.status_code == 422 and "n must be a whole number from 1 to 5000" in bad.text
    # deleting the run lets the sample go
    assert api["client"].delete(f"/v1/jobs/{job}").status_code == 204
    assert api["client"].delete(f"/v1/files/{found['file_id']}").status_code == 204


def test_labels_recorded_before_0008_read_as_not_said(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    config = alembic_config()
    with db.engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007_correction_decisions")
        connection.execute(sa.text(
            "INSERT INTO projects (id, name, created_at, settings) VALUES "
            "('prj', 'lab', 1.0, '{}')"))
        connection.execute(sa.text(
            "INSERT INTO labels (project_id, subject, dialogue_id, turn_index, slot, label, "
            "reviewer, created_at, updated_at) VALUES ('prj', :s, 'd1', 0, '', 'correct', "
            "'ana', 1.0, 1.0)"), {"s": DIGEST})
        connection.commit()
        command.upgrade(config, "head")
        connection.commit()
        rows = connection.execute(sa.text("SELECT blind FROM labels")).all()
        assert rows == [(None,)]
        assert "review_samples" in sa.inspect(connection).get_table_names()
        command.downgrade(config, "0007_correction_decisions")
        connection.commit()
        assert "review_samples" not in sa.inspect(connection).get_table_names()
    db.engine.dispose()
