"""Human labels keyed by what was judged: the predictions file, not the project.

A label says whether a system's predicted turn state is right, so two runs on different
predictions (systems A and B) must keep separate labels of the same (dialogue, turn), while
two judge runs on the same predictions share them. ``jobs.subject`` records the sha256 of the
predictions file a judge run judged; ``labels.subject`` joins the unique key. Existing rows
are filled from their job where it is known: ``job:<id>`` when the job or its predictions are
gone, ``""`` for labels given through no job.

Revision ID: 0003
Revises: 0002_batch
Create Date: 2025-06-01
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002_batch'
branch_labels = None
depends_on = None

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_OLD_KEY = ("project_id", "dialogue_id", "turn_index", "slot", "reviewer")

# the tables as this revision knows them (frozen here, not imported from the application)
_files = sa.table("files", sa.column("id", sa.String), sa.column("project_id", sa.String),
                  sa.column("sha256", sa.String))
_jobs = sa.table("jobs", sa.column("id", sa.String), sa.column("project_id", sa.String),
                 sa.column("kind", sa.String), sa.column("inputs", sa.JSON),
                 sa.column("imported", sa.Boolean), sa.column("subject", sa.String))
_labels = sa.table("labels", sa.column("id", sa.Integer), sa.column("job_id", sa.String),
                   sa.column("subject", sa.String))


def _job_subjects(conn: sa.Connection) -> dict[str, str | None]:
    """The predictions sha256 of every judge run that can still tell (None where not)."""
    rows = {r.id: r for r in conn.execute(sa.select(_jobs).where(
        _jobs.c.kind.in_(("evaluate", "retry-errors"))))}
    shas = {(r.project_id, r.id): r.sha256 for r in conn.execute(sa.select(_files))}
    found: dict[str, str | None] = {}

    def resolve(job_id: str, seen: frozenset[str]) -> str | None:
        if job_id in found:
            return found[job_id]
        row = rows.get(job_id)
        inputs: Any = (row.inputs if row is not None else None) or {}
        subject = None
        if row is None or job_id in seen or not isinstance(inputs, dict):
            pass
        elif row.imported:
            bundle = value if isinstance(value := inputs.get("bundle"), dict) else {}
            given = value if isinstance(value := bundle.get("inputs"), dict) else {}
            predictions = given.get("predictions")
            sha = predictions.get("sha256") if isinstance(predictions, dict) else None
            subject = sha if isinstance(sha, str) and _SHA256.match(sha) else None
        elif row.kind == "retry-errors" and isinstance(inputs.get("run"), str):
            subject = resolve(inputs["run"], seen | {job_id})
        elif isinstance(inputs.get("predictions"), str):
            subject = shas.get((row.project_id, inputs["predictions"]))
        found[job_id] = subject
        return subject

    for job_id in rows:
        resolve(job_id, frozenset())
    return found


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('subject', sa.String(length=80), nullable=True))
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.add_column(sa.Column('subject', sa.String(length=80), nullable=True))

    conn = op.get_bind()
    subjects = _job_subjects(conn)
    for job_id, subject in subjects.items():
        if subject is not None:
            conn.execute(_jobs.update().where(_jobs.c.id == job_id).values(subject=subject))
    label_jobs = {r.job_id for r in conn.execute(sa.select(_labels.c.job_id).distinct())}
    for job_id in label_jobs:
        if job_id is None:
            conn.execute(_labels.update().where(_labels.c.job_id.is_(None)).values(subject=""))
            continue
        subject = subjects.get(job_id) or f"job:{job_id}"
        conn.execute(_labels.update().where(_labels.c.job_id == job_id)
                     .values(subject=subject))

    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.alter_column('subject', existing_type=sa.String(length=80), nullable=False)
        batch_op.drop_constraint('uq_labels_reviewer', type_='unique')
        batch_op.create_unique_constraint(
            'uq_labels_subject',
            ['project_id', 'subject', 'dialogue_id', 'turn_index', 'slot', 'reviewer'])


def downgrade() -> None:
    """Back to one label per project, turn, slot and reviewer: refused while labels of
    different predictions share that key (the older schema cannot hold both)."""
    conn = op.get_bind()
    table = sa.table("labels", *(sa.column(c) for c in _OLD_KEY))
    clashes = conn.execute(sa.select(*table.c).group_by(*table.c)
                           .having(sa.func.count() > 1).limit(1)).first()
    if clashes is not None:
        raise RuntimeError("cannot downgrade: labels of different predictions files share "
                           f"a turn ({clashes.dialogue_id!r}, turn {clashes.turn_index}); "
                           "delete one of each pair first")
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_constraint('uq_labels_subject', type_='unique')
        batch_op.create_unique_constraint('uq_labels_reviewer', list(_OLD_KEY))
        batch_op.drop_column('subject')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('subject')
