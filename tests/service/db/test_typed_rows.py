"""Rows are typed across the service and the web: a job row is a ``JobRow`` (its columns are
the jobs table's), a judgment row a ``JudgmentRecord``, and no parameter holding a row is an
untyped ``Any``."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from judge._api_models import Job
from judge.service import JobRow
from judge.service.auth._auth import Principal
from judge.service.db._db import jobs, judgments
from judge.service.db._rows import JOB_COLUMNS, JudgmentRecord, judgment_row
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import JobSpec
from judge.service.queue import JobQueue
from tests.service.conftest import queue_database

PACKAGE = Path(__file__).resolve().parents[3] / "judge"
ROW_NAMES = {"row", "rows", "job", "jobs", "file", "files", "label", "labels", "record",
             "records"}
UNTYPED = {"Any", "list[Any]", "Iterable[Any]", "Iterator[Any]", "Sequence[Any]",
           "Any | None"}


def _untyped_row_parameters() -> list[str]:
    found = []
    for folder in ("service", "web"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                    if arg.arg in ROW_NAMES and (arg.annotation is None or
                                                 ast.unparse(arg.annotation) in UNTYPED):
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} "
                                     f"{node.name}({arg.arg})")
    return found


def test_no_row_parameter_in_the_service_or_the_web_is_untyped():
    assert _untyped_row_parameters() == []


def test_a_job_row_has_the_columns_of_the_jobs_table():
    assert set(JOB_COLUMNS) == {column.name for column in jobs.c}
    assert set(typing.get_type_hints(JudgmentRecord)) == {c.name for c in judgments.c}


def test_the_stores_and_the_queue_hand_out_typed_job_rows(tmp_path):
    db = queue_database(tmp_path / "queue.db")
    try:
        principal = Principal("tok_x", "x", "prj_x", "x", ("submit",))
        job_id = JobStore(db).submit(principal, JobSpec("audit", "live", {"run": "job_y"},
                                                        {}))["id"]
        shown = JobStore(db).get("prj_x", job_id)
        assert set(shown) == set(Job.model_fields)  # the one list of a job's public fields
        row = JobStore(db).row("prj_x", job_id)
        assert isinstance(row, JobRow) and (row.id, row.status, row.inputs) == \
            (job_id, "queued", {"run": "job_y"})
        claimed = JobQueue(db).claim("w", 30.0)
        assert isinstance(claimed, JobRow) and claimed.status == "running"
        assert claimed.lease_owner == "w" and claimed.attempts == 1
        kept = JobQueue(db).keep(job_id, "w", 30.0)
        assert isinstance(kept, JobRow) and kept.lease_expires > claimed.lease_expires - 1
        assert JobQueue(db).keep(job_id, "other", 30.0) is None
    finally:
        db.dispose()


def test_a_judgment_row_keeps_its_filter_columns():
    record = judgment_row("job_1", 3, {"dialogue_id": 7, "turn_index": "2", "verdict": "yes",
                                       "error": "timeout"})
    assert record == {"job_id": "job_1", "seq": 3, "dialogue_id": "7", "turn_index": 2,
                      "verdict": None, "has_error": True,
                      "row": {"dialogue_id": 7, "turn_index": "2", "verdict": "yes",
                              "error": "timeout"}}
