"""Human labels belong to the predictions they judge: runs on different predictions files keep
separate labels of the same turn, runs on the same predictions share them, and migration 0003
fills the subject of labels recorded before it (on SQLite and on a real Postgres)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from judge.service import Database, create_token
from judge.service.db._migrate import alembic_config, current_revision, head_revision
from tests.conftest import EXAMPLES

SHA_A, SHA_B, SHA_BUNDLE = "a" * 64, "b" * 64, "d" * 64


def _at_revision(db: Database, revision: str) -> None:
    """Bring a database to one migration (not necessarily the newest)."""
    config = alembic_config()
    with db.engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        connection.commit()


def _old_rows(conn: sa.Connection) -> None:
    """A project as revision 0001 stored it: runs on two predictions files, a retry of one,
    an imported bundle, a run whose job is gone, and labels given through each."""
    def row(table: str, **values: Any) -> None:
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        conn.execute(sa.text(f"INSERT INTO {table} ({columns}) VALUES ({marks})"), values)

    row("projects", id="prj", name="lab", created_at=1.0, settings="{}")
    for sha in (SHA_A, SHA_B):
        row("blobs", sha256=sha, size=1, data=b"x", created_at=1.0)
    row("files", id="file_a", project_id="prj", kind="predictions", name="a.jsonl",
        sha256=SHA_A, size=1, info="{}", created_at=1.0)
    row("files", id="file_b", project_id="prj", kind="predictions", name="b.jsonl",
        sha256=SHA_B, size=1, info="{}", created_at=1.0)
    jobs = {
        "job_a": ("evaluate", {"predictions": "file_a"}, False),
        "job_b": ("evaluate", {"predictions": "file_b"}, False),
        "job_retry": ("retry-errors", {"run": "job_a"}, False),
        "job_deleted_file": ("evaluate", {"predictions": "file_gone"}, False),
        "job_bundle": ("evaluate", {"bundle": {"job_id": "x", "inputs": {"predictions": {
            "id": "f", "sha256": SHA_BUNDLE}}}}, True),
        "job_metrics": ("metrics", {"predictions": ["file_a"]}, False),
    }
    for job_id, (kind, inputs, imported) in jobs.items():
        row("jobs", id=job_id, project_id="prj", kind=kind, mode="live", status="succeeded",
            inputs=json.dumps(inputs), options="{}", created_at=1.0, updated_at=1.0,
            attempts=1, cancel_requested=False, cost_usd=0.0, tokens_used=0,
            imported=imported)
    for number, job_id in enumerate(("job_a", "job_retry", "job_deleted_file", "job_bundle",
                                     "job_vanished", None)):
        row("labels", project_id="prj", job_id=job_id, dialogue_id=f"D{number}",
            turn_index=0, slot="", label="correct", reviewer="alice", created_at=1.0,
            updated_at=1.0)


def _check_upgrade(url: str) -> None:
    db = Database(url)
    try:
        _at_revision(db, "0001")
        with db.write() as conn:
            _old_rows(conn)
        db.migrate()
        assert current_revision(db) == head_revision()
        with db.read() as conn:
            subjects = dict(conn.execute(sa.text("SELECT id, subject FROM jobs")).all())
            labelled = dict(conn.execute(sa.text(
                "SELECT dialogue_id, subject FROM labels")).all())
        assert subjects == {"job_a": SHA_A, "job_b": SHA_B, "job_retry": SHA_A,
                            "job_deleted_file": None, "job_bundle": SHA_BUNDLE,
                            "job_metrics": None}
        assert labelled == {"D0": SHA_A, "D1": SHA_A, "D2": "job:job_deleted_file",
                            "D3": SHA_BUNDLE, "D4": "job:job_vanished", "D5": ""}
        # the new key: the same turn and reviewer, once per predictions file
        insert = sa.text("INSERT INTO labels (project_id, subject, dialogue_id, turn_index, "
                         "slot, label, reviewer, created_at, updated_at) VALUES ('prj', "
                         ":subject, 'D0', 0, '', 'incorrect', 'alice', 2.0, 2.0)")
        with db.write() as conn:
            conn.execute(insert, {"subject": SHA_B})
        with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
            conn.execute(insert, {"subject": SHA_A})
        with db.read() as conn:
            assert conn.execute(sa.text(
                "SELECT count(*) FROM labels WHERE dialogue_id = 'D0'")).scalar() == 2
    finally:
        db.dispose()


def test_migration_0003_fills_the_subject_of_old_labels_on_sqlite(tmp_path):
    _check_upgrade(f"sqlite:///{tmp_path / 'old.db'}")


def test_migration_0003_fills_the_subject_of_old_labels_on_postgres(postgres_db):
    _check_upgrade(postgres_db)


def test_downgrade_is_refused_while_two_predictions_share_a_turn(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        _at_revision(db, "0001")
        with db.write() as conn:
            _old_rows(conn)
        db.migrate()
        config = alembic_config()
        with db.engine.connect() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0001")  # one label per turn: it fits the old key
            connection.commit()
        assert current_revision(db) == "0001"
        db.migrate()
        with db.write() as conn:
            conn.execute(sa.text(
                "INSERT INTO labels (project_id, subject, dialogue_id, turn_index, slot, "
                "label, reviewer, created_at, updated_at) VALUES ('prj', :s, 'D0', 0, '', "
                "'incorrect', 'alice', 2.0, 2.0)"), {"s": SHA_B})
        with db.engine.connect() as connection:  # later migrations step back first
            config.attributes["connection"] = connection
            command.downgrade(config, "0003")
            connection.commit()
        with pytest.raises(RuntimeError, match="share a turn"), \
                db.engine.connect() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0002_batch")
        assert current_revision(db) == "0003"
    finally:
        db.dispose()


# --- through the API -----------------------------------------------------------------------------


def _other_predictions(tmp_path: Path) -> Path:
    """The example predictions with one turn state changed: another system's file."""
    lines = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["system_name"] = "system-b"
    first["turns"][0]["pred_turn_state"]["hotel-area"] = "south"
    path = tmp_path / "predictions-b.jsonl"
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return path


def test_labels_of_two_systems_stay_apart_and_judge_runs_share_them(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    reviewer = create_token(service_env["service"].db, "lab", "read,review", name="carol")[0]
    other = api.upload(_other_predictions(tmp_path), "predictions")
    assert other.status_code == 201, other.text

    def run(predictions: str, method: str) -> str:
        job = api.post("/v1/jobs", json={"kind": "evaluate",
                                         "inputs": {**files, "predictions": predictions},
                                         "options": {"model": "m", "method": method}})
        assert job.status_code == 201, job.text
        return str(job.json()["id"])

    job_a = run(files["predictions"], "two-dim")
    job_b = run(other.json()["id"], "two-dim")
    job_a_direct = run(files["predictions"], "direct")  # another judge of system A
    turn = {"dialogue_id": "EX001.json", "turn_index": 0}
    for job_id, label in ((job_a, "correct"), (job_b, "incorrect")):
        saved = api.put("/v1/labels", token=reviewer,
                        json={**turn, "label": label, "job_id": job_id})
        assert saved.status_code == 200, saved.text

    def labels(**params: str) -> list[dict[str, Any]]:
        return api.get("/v1/labels", token=reviewer, params=params).json()["labels"]

    assert len(labels()) == 2  # labelling B kept A's label
    assert [x["label"] for x in labels(job_id=job_a)] == ["correct"]
    assert [x["label"] for x in labels(job_id=job_b)] == ["incorrect"]
    assert labels(job_id=job_a_direct) == labels(job_id=job_a)  # same predictions, shared
    # a label given on the direct run replaces the one given on the two-dim run
    relabel = api.put("/v1/labels", token=reviewer,
                      json={**turn, "label": "unsure", "job_id": job_a_direct})
    assert relabel.json()["id"] == labels(job_id=job_a)[0]["id"]
    assert [x["label"] for x in labels(job_id=job_a)] == ["unsure"]
    mismatch = api.put("/v1/labels", token=reviewer, json={
        **turn, "label": "correct", "job_id": job_a, "predictions": other.json()["id"]})
    assert mismatch.status_code == 422 and mismatch.json()["error"]["field"] == "predictions"
    for job_id in (job_a, job_b, job_a_direct):
        assert api.wait(job_id)["status"] == "succeeded"
    retry = api.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {"run": job_b}})
    assert labels(job_id=retry.json()["id"]) == labels(job_id=job_b)  # a retry judges B too
    assert api.wait(retry.json()["id"])["status"] == "succeeded"
