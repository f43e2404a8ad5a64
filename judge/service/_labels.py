"""Human labels recorded through the service (the ``review`` scope): one label per reviewer per
turn (or per slot of a turn), ``correct``, ``incorrect`` or ``unsure``, with a note and times.

The web interface's annotation review writes here; :meth:`LabelStore.as_label_file` gives the
labels file format that ``dst-judge agreement --human`` reads (turn labels only; ``unsure``
and per-slot labels are left out of that older format).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from .._errors import ServiceError
from ._auth import Principal
from ._db import Database, labels, now

_BINARY = {"correct": 1, "incorrect": 0}


class LabelStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, principal: Principal, values: dict[str, Any]) -> dict[str, Any]:
        """Record (or replace) this reviewer's label of one turn or slot."""
        key = {"project_id": principal.project_id, "dialogue_id": values["dialogue_id"],
               "turn_index": values["turn_index"], "slot": values.get("slot") or "",
               "reviewer": principal.token_name}
        moment = now()
        with self.db.write() as conn:
            found = conn.execute(sa.select(labels.c.id, labels.c.created_at).where(
                *(labels.c[k] == v for k, v in key.items()))).first()
            data = {**key, "job_id": values.get("job_id"), "label": values["label"],
                    "note": values.get("note"), "token_id": principal.token_id,
                    "updated_at": moment}
            if found is None:
                label_id = conn.execute(labels.insert().values(**data, created_at=moment)
                                        .returning(labels.c.id)).scalar()
            else:
                label_id = found.id
                conn.execute(labels.update().where(labels.c.id == found.id).values(**data))
            row = conn.execute(sa.select(labels).where(labels.c.id == label_id)).first()
        return _public(row)

    def list(self, project_id: str, *, job_id: str | None = None,
             reviewer: str | None = None) -> list[dict[str, Any]]:
        query = (sa.select(labels).where(labels.c.project_id == project_id)
                 .order_by(labels.c.dialogue_id, labels.c.turn_index, labels.c.slot,
                           labels.c.reviewer))
        if job_id is not None:
            query = query.where(labels.c.job_id == job_id)
        if reviewer is not None:
            query = query.where(labels.c.reviewer == reviewer)
        with self.db.read() as conn:
            return [_public(row) for row in conn.execute(query)]

    def delete(self, principal: Principal, label_id: int) -> None:
        query = labels.delete().where(labels.c.id == label_id,
                                      labels.c.project_id == principal.project_id)
        if not principal.allows("admin"):
            query = query.where(labels.c.token_id == principal.token_id)
        with self.db.write() as conn:
            if conn.execute(query).rowcount == 0:
                raise ServiceError(f"no label {label_id} of yours in this project", status=404)

    @staticmethod
    def as_label_file(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of the human labels file format (turn labels that are correct/incorrect)."""
        out = []
        for item in items:
            if item["slot"] or item["label"] not in _BINARY:
                continue
            row = {"dialogue_id": item["dialogue_id"], "turn_index": item["turn_index"],
                   "label": _BINARY[item["label"]], "annotator": item["reviewer"]}
            if item.get("note"):
                row["note"] = item["note"]
            out.append(row)
        return out


def _public(row: Any) -> dict[str, Any]:
    data = dict(row._mapping)
    data.pop("project_id", None)
    return data
