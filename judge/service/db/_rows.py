"""The rows of the service's tables as the code passes them around: typed, so a reader (and
mypy) knows which columns a job or a judgment row has without reading the schema in
:mod:`._db`. A row read from the database becomes one here, at the store that read it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypedDict

import sqlalchemy as sa


@dataclass(frozen=True)
class JobRow:
    """A row of the ``jobs`` table (``manifest`` is None when the query left it out: a run's
    manifest is large and only the runners read it)."""

    id: str
    project_id: str
    token_id: str | None
    kind: str
    mode: str
    status: str
    endpoint: str | None
    inputs: dict[str, Any]
    options: dict[str, Any]
    budget_usd: float | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    updated_at: float
    lease_owner: str | None
    lease_expires: float | None
    attempts: int
    cancel_requested: bool
    exit_code: int | None
    error: str | None
    progress: dict[str, Any] | None
    summary: dict[str, Any] | None
    cost_usd: float
    tokens_used: int
    imported: bool
    subject: str | None
    wake_at: float | None
    manifest: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> JobRow:
        """The typed row of a database row of the jobs table (all its columns, or all but
        ``manifest``)."""
        return cls(**row._mapping)


JOB_COLUMNS = tuple(f.name for f in fields(JobRow))


class JudgmentRecord(TypedDict):
    """A row of the ``judgments`` table: a judged turn, with the columns its filters use."""

    job_id: str
    seq: int
    dialogue_id: str
    turn_index: int
    verdict: bool | None
    has_error: bool
    row: dict[str, Any]


def judgment_row(job_id: str, seq: int, row: dict[str, Any]) -> JudgmentRecord:
    """The ``judgments`` table's row for a run's judged turn ``row`` (its columns for
    filtering, the row itself as JSON)."""
    verdict = row.get("verdict")
    return {"job_id": job_id, "seq": seq, "dialogue_id": str(row.get("dialogue_id")),
            "turn_index": int(row.get("turn_index") or 0),
            "verdict": verdict if isinstance(verdict, bool) else None,
            "has_error": bool(row.get("error")), "row": row}
