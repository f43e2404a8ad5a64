"""The rows of the service's tables as the code passes them around: typed, so a reader knows
which columns a job, a file, a label or a judgment row has without reading the schema in
:mod:`._db`."""

from __future__ import annotations

from typing import Any


def judgment_row(job_id: str, seq: int, row: dict[str, Any]) -> dict[str, Any]:
    """The ``judgments`` table's row for a run's judged turn ``row`` (its columns for
    filtering, the row itself as JSON)."""
    verdict = row.get("verdict")
    return {"job_id": job_id, "seq": seq, "dialogue_id": str(row.get("dialogue_id")),
            "turn_index": int(row.get("turn_index") or 0),
            "verdict": verdict if isinstance(verdict, bool) else None,
            "has_error": bool(row.get("error")), "row": row}
