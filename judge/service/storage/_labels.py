"""Human labels recorded through the service (the ``review`` scope): one label per reviewer per
turn (or per slot of a turn) of one *subject*, ``correct``, ``incorrect`` or ``unsure``, with a
note and times.

A label judges a system's predicted turn state, so its subject is the sha256 of the
predictions file (:func:`job_subject`): runs on different predictions keep separate labels of
the same turn, and judge runs on the same predictions (another method or model) share them.

The web interface's annotation review writes here; :meth:`LabelStore.as_label_file` gives the
labels file format that ``dst-judge agreement --human`` reads (turn labels only; ``unsure``
and per-slot labels are left out of that older format), with the predictions digest.
"""

from __future__ import annotations

import builtins
import re
from typing import Any

import sqlalchemy as sa

from ..._errors import ServiceError
from ..auth import Principal
from ..db import Database, JobRow, files, jobs, labels, now

_BINARY = {"correct": 1, "incorrect": 0}
SHA256 = re.compile(r"^[0-9a-f]{64}$")
JUDGE_RUNS = ("evaluate", "retry-errors")


def job_subject(row: JobRow) -> str:
    """What a judge run's labels are about: the predictions sha256 recorded with the job, or
    the job itself when its predictions are unknown (an imported bundle that did not say)."""
    return subject_key(row.id, row.subject)


def subject_key(job_id: str, subject: str | None) -> str:
    """:func:`job_subject` from the two columns it reads."""
    return str(subject) if subject else f"job:{job_id}"


def predictions_sha256(subject: str) -> str | None:
    """The subject as a predictions digest, None when it is not one."""
    return subject if SHA256.match(subject) else None


class LabelStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def subject_of_job(self, project_id: str, job_id: str, *, field: str = "job_id") -> str:
        """The subject of a judge run's labels (404 for no such job, 422 for other kinds)."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(jobs.c.id, jobs.c.kind, jobs.c.subject).where(
                jobs.c.id == job_id, jobs.c.project_id == project_id)).first()
        if row is None:
            raise ServiceError(f"no job {job_id!r} in this project", status=404, field=field)
        if row.kind not in JUDGE_RUNS:
            raise ServiceError(f"job {job_id!r} is a {row.kind} job; labels judge the "
                               "predictions of a judge run", status=422, field=field)
        return subject_key(row.id, row.subject)

    def subject_of_file(self, project_id: str, file_id: str, *,
                        field: str = "predictions") -> str:
        """The subject of labels given on an uploaded predictions file: its sha256."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(files.c.kind, files.c.sha256).where(
                files.c.id == file_id, files.c.project_id == project_id)).first()
        if row is None:
            raise ServiceError(f"no file {file_id!r} in this project", status=404, field=field)
        if row.kind != "predictions":
            raise ServiceError(f"file {file_id!r} is a {row.kind} file; expected predictions",
                               status=422, field=field)
        return str(row.sha256)

    def put(self, principal: Principal, values: dict[str, Any]) -> dict[str, Any]:
        """Record (or replace) this reviewer's label of one turn or slot of one subject."""
        if not values.get("subject"):
            raise ServiceError("a label needs its subject (the predictions it judges)",
                               status=422, field="subject")
        key = {"project_id": principal.project_id, "subject": values["subject"],
               "dialogue_id": values["dialogue_id"],
               "turn_index": values["turn_index"], "slot": values.get("slot") or "",
               "reviewer": principal.token_name}
        moment = now()
        with self.db.write() as conn:
            found = conn.execute(sa.select(labels.c.id, labels.c.created_at).where(
                *(labels.c[k] == v for k, v in key.items()))).first()
            data = {**key, "job_id": values.get("job_id"), "label": values["label"],
                    "note": values.get("note"), "token_id": principal.token_id,
                    "blind": values.get("blind"), "updated_at": moment}
            if found is None:
                label_id = conn.execute(labels.insert().values(**data, created_at=moment)
                                        .returning(labels.c.id)).scalar()
            else:
                label_id = found.id
                conn.execute(labels.update().where(labels.c.id == found.id).values(**data))
            row = conn.execute(sa.select(labels).where(labels.c.id == label_id)).one()
        return _public(row)

    def list(self, project_id: str, *, subject: str | None = None,
             reviewer: str | None = None) -> list[dict[str, Any]]:
        """Labels of the project, of one subject (what a run judged) when given."""
        query = (sa.select(labels).where(labels.c.project_id == project_id)
                 .order_by(labels.c.subject, labels.c.dialogue_id, labels.c.turn_index,
                           labels.c.slot, labels.c.reviewer))
        if subject is not None:
            query = query.where(labels.c.subject == subject)
        if reviewer is not None:
            query = query.where(labels.c.reviewer == reviewer)
        with self.db.read() as conn:
            return [_public(row) for row in conn.execute(query)]

    def delete(self, principal: Principal, label_id: int) -> None:
        query = labels.delete().where(labels.c.id == label_id,
                                      labels.c.project_id == principal.project_id)
        if not principal.allows("admin"):  # the reviewer's, whichever of its tokens gave it
            query = query.where(labels.c.reviewer == principal.token_name)
        with self.db.write() as conn:
            if conn.execute(query).rowcount == 0:
                raise ServiceError(f"no label {label_id} of yours in this project", status=404)

    @staticmethod
    def as_label_file(items: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
        """Rows of the human labels file format (turn labels that are correct/incorrect)."""
        out = []
        for item in items:
            if item["slot"] or item["label"] not in _BINARY:
                continue
            row = {"dialogue_id": item["dialogue_id"], "turn_index": item["turn_index"],
                   "label": _BINARY[item["label"]], "annotator": item["reviewer"]}
            sha = predictions_sha256(str(item.get("subject") or ""))
            if sha is not None:
                row["predictions_sha256"] = sha
            if item.get("note"):
                row["note"] = item["note"]
            if item.get("blind") is not None:
                row["blind"] = bool(item["blind"])
            out.append(row)
        return out


def _public(row: sa.Row[Any]) -> dict[str, Any]:
    data = dict(row._mapping)
    data.pop("project_id", None)
    return data
