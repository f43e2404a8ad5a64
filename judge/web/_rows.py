"""Judgment rows without their bulk, read straight from the service's ``judgments`` table
(its columns are part of the documented contract, docs/SERVICE.md).

A row of a judge run is a few kilobytes, most of it the calls (every reply text) and the
filter trace. Lists, filters and the review queue need none of that, so the database drops
those keys before the rows leave it (SQLite ``json_remove``, Postgres ``jsonb -``): reading a
7,368-turn run this way takes a few tenths of a second instead of seconds. A turn's own page
reads its full rows through the service (``JobStore.judgments``).

Callers check first that the job belongs to the viewer's project (``JobStore.row``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

BULK = ("calls", "trace", "state")
_SLIM = {
    "sqlite": "json_remove(row, '$.calls', '$.trace', '$.state')",
    "postgresql": "(row::jsonb - 'calls' - 'trace' - 'state')::text",
}


def _expression(db: Any) -> str | None:
    return _SLIM.get(db.engine.dialect.name)


def slim_rows(service: Any, project_id: str, job_id: str, *, start: int = 0,
              stop: int | None = None, batch: int = 2000) -> Iterator[tuple[int, dict[str, Any]]]:
    """(position, row without calls, trace and state) for rows ``start <= seq < stop``."""
    expression = _expression(service.db)
    if expression is None:  # another database: the full rows, trimmed here
        rows = service.jobs.judgments(project_id, job_id, offset=start,
                                      limit=None if stop is None else max(0, stop - start))
        for position, row in enumerate(rows, start=start):
            yield position, {k: v for k, v in row.items() if k not in BULK}
        return
    query = sa.text(f"SELECT seq, {expression} AS slim FROM judgments "
                    "WHERE job_id = :job AND seq >= :low AND seq < :high ORDER BY seq LIMIT :n")
    low, high = start, stop if stop is not None else 2**31 - 1
    while low < high:
        with service.db.read() as conn:
            found = conn.execute(query, {"job": job_id, "low": low, "high": high,
                                         "n": batch}).all()
        if not found:
            return
        for seq, text in found:
            yield int(seq), json.loads(text) if isinstance(text, str) else dict(text)
        low = int(found[-1][0]) + 1


_FULL = {"sqlite": "row", "postgresql": "row::text"}


def dialogue_rows(service: Any, project_id: str, job_id: str, dialogue_id: str
                  ) -> list[dict[str, Any]]:
    """Every full row of one dialogue of a run, in turn order, through the table's
    (job, dialogue, turn) index; a turn's page needs no other row of the run."""
    expression = _FULL.get(service.db.engine.dialect.name)
    if expression is None:
        return list(service.jobs.judgments(project_id, job_id, dialogue_id=dialogue_id))
    query = sa.text(f"SELECT {expression} AS full_row FROM judgments WHERE job_id = :job "
                    "AND dialogue_id = :dialogue ORDER BY turn_index")
    with service.db.read() as conn:
        found = conn.execute(query, {"job": job_id, "dialogue": dialogue_id}).all()
    return [json.loads(text) if isinstance(text, str) else dict(text) for (text,) in found]
