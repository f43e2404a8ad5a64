"""Reads of a finished run's judgment rows for pages that show many turns at once (the web
interface's lists, filters and review queue) or one dialogue in full.

A row of a judge run is a few kilobytes, most of it the calls (every reply text) and the
filter trace. Lists need none of that, so the database drops those keys before the rows leave
it (SQLite ``json_remove``, Postgres ``jsonb -``): reading a 7,368-turn run this way takes a
few tenths of a second instead of seconds. One dialogue's rows come through the table's
(job, dialogue, turn) index.

Every read is limited to the given project in the statement itself (a join on ``jobs``), so a
job id of another project reads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

import sqlalchemy as sa

from ..db import Database, jobs, judgments

BULK = ("calls", "trace", "state")
"""The keys a slim row leaves out."""

_SLIM = {
    "sqlite": "json_remove(judgments.row, '$.calls', '$.trace', '$.state')",
    "postgresql": "(judgments.row::jsonb - 'calls' - 'trace' - 'state')::text",
}


def _slim_expression(dialect: str) -> Any:
    text = _SLIM.get(dialect)
    return None if text is None else sa.literal_column(text)


def _decoded(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


class DatabaseHost(Protocol):
    """Anything holding the service database (the service itself)."""

    db: Database


class JudgmentReads:
    """Read-only access to judgment rows, for pages (made from the service, so callers never
    handle the database)."""

    def __init__(self, host: DatabaseHost) -> None:
        self.db = host.db

    def _of_project(self, project_id: str, job_id: str) -> Any:
        return sa.and_(judgments.c.job_id == job_id, judgments.c.job_id.in_(
            sa.select(jobs.c.id).where(jobs.c.id == job_id, jobs.c.project_id == project_id)))

    def slim_rows(self, project_id: str, job_id: str, *, start: int = 0,
                  stop: int | None = None, batch: int = 2000
                  ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(position, row without calls, trace and state) for rows ``start <= seq < stop``,
        read in batches."""
        expression = _slim_expression(self.db.engine.dialect.name)
        column = judgments.c.row if expression is None else expression
        low, high = start, stop if stop is not None else 2**31 - 1
        while low < high:
            query = (sa.select(judgments.c.seq, column.label("slim"))
                     .where(self._of_project(project_id, job_id), judgments.c.seq >= low,
                            judgments.c.seq < high)
                     .order_by(judgments.c.seq).limit(batch))
            with self.db.read() as conn:
                found = conn.execute(query).all()
            if not found:
                return
            for seq, value in found:
                row = _decoded(value)
                if expression is None:  # another database: trimmed here
                    row = {k: v for k, v in row.items() if k not in BULK}
                yield int(seq), row
            low = int(found[-1][0]) + 1

    def dialogue_rows(self, project_id: str, job_id: str, dialogue_id: str
                      ) -> list[dict[str, Any]]:
        """Every full row of one dialogue of a run, in turn order."""
        query = (sa.select(judgments.c.row)
                 .where(self._of_project(project_id, job_id),
                        judgments.c.dialogue_id == dialogue_id)
                 .order_by(judgments.c.turn_index))
        with self.db.read() as conn:
            return [_decoded(value) for (value,) in conn.execute(query).all()]
