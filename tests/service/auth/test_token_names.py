"""A reviewer is a name: migration 0005 makes the names of a project's live tokens unique
(renaming duplicates a database already holds), a second live token of a name is refused, a
rotated token keeps its reviewer's labels and usage, and a refused token leaves no row."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from judge._errors import OptionError, ServiceError
from judge.service import Database, create_token, revoke_token, rotate_token
from judge.service.auth._auth import Principal
from judge.service.db._db import labels, projects, tokens
from judge.service.db._migrate import alembic_config
from judge.service.jobs._jobs import JobStore
from judge.service.storage._labels import LabelStore
from tests.service.conftest import count_rows, insert_job


def _at_revision(db: Database, revision: str) -> None:
    config = alembic_config()
    with db.engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        connection.commit()


def test_migration_0005_renames_live_duplicates_and_then_refuses_them(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        _at_revision(db, "0004_ledger")
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, name, created_at, settings) "
                                 "VALUES ('prj', 'lab', 1, '{}')"))
            for number, (name, revoked) in enumerate(
                    [("ana", None), ("ana", None), ("ana", 5.0), ("bo", None), ("ana", None)]):
                conn.execute(sa.text(
                    "INSERT INTO tokens (id, project_id, name, hash, prefix, scopes, "
                    "created_at, revoked_at) VALUES (:id, 'prj', :name, :hash, 'dsj_', 'read', "
                    ":at, :revoked)"), {"id": f"tok_{number}", "name": name,
                                        "hash": f"h{number}", "at": float(number),
                                        "revoked": revoked})
        db.migrate()
        with db.read() as conn:
            names = dict(conn.execute(sa.select(tokens.c.id, tokens.c.name)).all())
        assert names == {"tok_0": "ana", "tok_1": "ana#tok_1", "tok_2": "ana", "tok_3": "bo",
                         "tok_4": "ana#tok_4"}  # the oldest live one keeps the name
        with pytest.raises(sa.exc.IntegrityError), db.write() as conn:
            conn.execute(tokens.insert().values(id="tok_9", project_id="prj", name="bo",
                                                hash="h9", prefix="dsj_", scopes="read",
                                                created_at=9.0))
    finally:
        db.dispose()


def test_a_second_live_token_of_a_name_is_409_and_writes_nothing(db):
    create_token(db, "lab", "review", name="ana")
    before = (count_rows(db, tokens), count_rows(db, projects))
    with pytest.raises(ServiceError) as refused:
        create_token(db, "lab", "admin", name="ana")
    assert refused.value.status == 409 and refused.value.field == "name"
    with pytest.raises(OptionError):
        create_token(db, "new-project", "read", name="x", spend_cap_usd=float("inf"))
    assert (count_rows(db, tokens), count_rows(db, projects)) == before  # not even the project
    create_token(db, "other", "review", name="ana")  # another project's ana is another person


def test_rotation_keeps_the_reviewers_labels_usage_and_spending(db):
    secret, record = create_token(db, "lab", "review", name="ana", spend_cap_usd=2.0)
    book_principal = Principal(record["id"], "ana", record["project_id"], "lab", ("review",))
    store = LabelStore(db)
    label = store.put(book_principal, {"subject": "s" * 64, "dialogue_id": "d",
                                       "turn_index": 0, "label": "correct"})
    new_secret, rotated = rotate_token(db, "lab", "ana")
    assert new_secret != secret and rotated["replaces"] == record["id"]
    assert rotated["spend_cap_usd"] == 2.0 and rotated["scopes"] == ["review"]
    with db.read() as conn:
        old = conn.execute(sa.select(tokens).where(tokens.c.id == record["id"])).first()
    assert old.revoked_at is not None
    after = Principal(rotated["id"], "ana", record["project_id"], "lab", ("review",))
    store.delete(after, label["id"])  # still theirs, though another token gave it
    assert count_rows(db, labels) == 0
    with pytest.raises(ServiceError):
        rotate_token(db, "lab", "nobody")
    # a job the old token paid for
    insert_job(db, "job_1", record["project_id"], record["id"], "succeeded", cost_usd=1.5,
               tokens_used=100)
    assert JobStore(db).spent_by_token(rotated["id"]) == 1.5  # the cap still counts it
    usage = JobStore(db).usage(record["project_id"])["tokens"]
    assert usage == [{"token_id": rotated["id"], "name": "ana", "spend_cap_usd": 2.0,
                      "jobs": 1, "cost_usd": 1.5, "tokens": 100}]


def test_a_revoked_name_is_free_again(db):
    _, record = create_token(db, "lab", "read", name="ana")
    assert revoke_token(db, record["id"])
    create_token(db, "lab", "read", name="ana")
