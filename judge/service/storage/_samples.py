"""Which stored file is a judge run's review sample: the run's *estimate sample* (the one the
estimates read, fixed once a turn of it has a label) and the separate draws made once it is
fixed, referenced by file id.

A sample is an ordinary ``sample`` file of the project (the file store keeps its bytes); this
table says which file plays which part for which run, so it is found however many files the
project holds and whoever uploads one under a similar name. Only an explicit draw (a ``POST``
with the ``review`` scope) writes here; a page that shows a sample only reads.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..._errors import ServiceError
from ..db import Database, files, now, review_samples

ESTIMATE = "estimate"
"""The reference name of a run's estimate sample."""


def separate_name(n: int, seed: int) -> str:
    """The reference name of a separate draw of ``n`` units with ``seed``."""
    return f"n{n}-seed{seed}"


class ReviewSamples:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, project_id: str, job_id: str, name: str = ESTIMATE) -> dict[str, Any] | None:
        """The reference (``file_id``, ``created_at``: when it was made) with its file's
        ``sha256`` and stored ``file_name``; None when the run has no such sample. A
        reference whose file is gone is a 410 naming it (the sample cannot be drawn again
        silently: its labels would then count for another sample)."""
        query = (sa.select(review_samples.c.file_id, review_samples.c.created_at,
                           files.c.sha256, files.c.name.label("file_name"))
                 .select_from(review_samples.outerjoin(files,
                                                       files.c.id == review_samples.c.file_id))
                 .where(review_samples.c.project_id == project_id,
                        review_samples.c.job_id == job_id, review_samples.c.name == name))
        with self.db.read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        if row.sha256 is None:
            raise ServiceError(f"the review sample of run {job_id} (file {row.file_id}) is "
                               "gone", status=410, field="sample")
        return dict(row._mapping)

    def put(self, project_id: str, job_id: str, name: str, file_id: str,
            token_id: str | None = None) -> str | None:
        """Make ``file_id`` the run's sample ``name``; returns the file it replaces (None
        when there was none, or it was the same)."""
        key = {"project_id": project_id, "job_id": job_id, "name": name}
        with self.db.write() as conn:
            old = conn.execute(sa.select(review_samples.c.file_id).where(
                *(review_samples.c[k] == v for k, v in key.items()))).scalar()
            if old is None:
                conn.execute(review_samples.insert().values(
                    **key, file_id=file_id, token_id=token_id, created_at=now()))
                return None
            if old != file_id:
                conn.execute(review_samples.update().where(
                    *(review_samples.c[k] == v for k, v in key.items())).values(
                        file_id=file_id, token_id=token_id, created_at=now()))
                return str(old)
        return None
