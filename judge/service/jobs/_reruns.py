"""What a ``retry-errors`` job continues: the first run of its chain of retries, the input files
that run read, and whether the endpoint and model a retry would use are ones job creation
accepts.

An imported run (``POST /v1/bundles``) holds no input files, only their names and sha256: its
retry reads the project's files of the same content and kind, and is refused at submission
(422 naming each missing input) when the project has none. It runs on the endpoint the server
gives it (the run's own endpoint belonged to the exporting server), which must offer the run's
model, as job creation requires.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from ..._errors import ServiceError
from ..db import Database, ServiceSettings, files, jobs
from ._jobspec import JobSpec, check_model, endpoint_for

JUDGE_INPUTS = {"schema": True, "dialogues": True, "predictions": True, "rules": False}
"""A judge run's input files: name → required."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MAX_CHAIN = 1000
"""Retries of retries followed at most (a cycle cannot be made, but a walk stays bounded)."""


def first_run(conn: sa.Connection, project_id: str, job_id: str) -> Any | None:
    """The run a chain of retries started from (``job_id``'s own row if it is not a retry);
    None when a job of the chain is not in the project."""
    for _ in range(_MAX_CHAIN):
        row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id,
                                                 jobs.c.project_id == project_id)).first()
        if row is None or row.kind != "retry-errors":
            return row
        source = row.inputs.get("run") if isinstance(row.inputs, dict) else None
        if not isinstance(source, str):
            return None
        job_id = source
    return None


def run_input_files(conn: sa.Connection, project_id: str, run: Any) -> dict[str, str]:
    """Input name → file id of a judge run: its own inputs, or for an imported run the
    project's newest files of the same sha256 and kind (ServiceError 422 naming each input
    the project lacks)."""
    if not run.imported:
        return {k: v for k, v in run.inputs.items() if k in JUDGE_INPUTS and isinstance(v, str)}
    bundle = run.inputs.get("bundle") if isinstance(run.inputs, dict) else None
    described = bundle.get("inputs") if isinstance(bundle, dict) else None
    described = described if isinstance(described, dict) else {}
    found: dict[str, str] = {}
    missing: list[str] = []
    for name, required in JUDGE_INPUTS.items():
        entry = described.get(name)
        fields: dict[str, Any] = entry if isinstance(entry, dict) else {}
        sha256 = fields.get("sha256")
        if not isinstance(sha256, str) or not _SHA256.match(sha256):
            if required or entry is not None:
                missing.append(f"{name} (the bundle names no sha256 of it)")
            continue
        file_id = conn.execute(sa.select(files.c.id).where(
            files.c.project_id == project_id, files.c.kind == name, files.c.sha256 == sha256)
            .order_by(files.c.created_at.desc()).limit(1)).scalar()
        if file_id is None:
            label = given if isinstance(given := fields.get("name"), str) else name
            missing.append(f"{name} {label[:100]!r} (sha256 {sha256[:12]}…)")
        else:
            found[name] = file_id
    if missing:
        raise ServiceError(
            f"job {run.id!r} was imported from a bundle, which carries the digests of its "
            "inputs, not the files: upload the same files to this project first (missing: "
            f"{'; '.join(missing)})", status=422, field="inputs.run")
    return found


def check_retry(db: Database, settings: ServiceSettings, project_id: str, spec: JobSpec) -> None:
    """A retry-errors job is refused at submission (422) when the run it continues was
    imported without its inputs in this project, or would call an endpoint or a model that
    job creation refuses (an imported run's options say the exporter's model). A run that is
    not in the project is left to the reference checks (their own 422)."""
    if spec.kind != "retry-errors":
        return
    with db.read() as conn:
        run = first_run(conn, project_id, str(spec.inputs["run"]))
        if run is None or run.kind != "evaluate":
            return
        run_input_files(conn, project_id, run)
    name, endpoint = _endpoint(run.endpoint, settings)
    model = (run.options or {}).get("model", endpoint.default_model)
    try:
        check_model(name, endpoint, model, field="inputs.run")
    except ServiceError as exc:
        raise ServiceError(f"job {run.id!r} judged with model {model!r}, which this retry "
                           f"cannot ask: {exc.reason}", status=422, field="inputs.run") from None


def _endpoint(name: str | None, settings: ServiceSettings) -> tuple[str, Any]:
    try:
        return endpoint_for(name, settings)
    except ServiceError as exc:
        raise ServiceError(f"the run's endpoint is gone from this server: {exc.reason}",
                           status=422, field="inputs.run") from None
