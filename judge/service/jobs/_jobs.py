"""The jobs as the API sees them: submit, look up, list, cancel, resume, delete, and read what a
job made (judgments, run log, artifacts, usage).

The workers' side (claim with a lease, renew, park, finish, purge) is the queue's, in
:mod:`judge.service.queue`; it writes the rows read here.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator
from typing import Any, TypeAlias

import sqlalchemy as sa

from ..._errors import ServiceError
from ...pipeline import Run
from ..auth import Principal, TokenBook, new_id
from ..db import (
    Database,
    JobRow,
    artifacts,
    files,
    job_calls,
    jobs,
    judgments,
    notify_queue,
    now,
    review_samples,
)
from ..storage import subject_key
from ._jobspec import JobSpec
from ._lifecycle import (
    ACTIVE,
    CANCELLABLE_AT_ONCE,
    RESUMABLE,
    WITH_RESULTS,
    JobStatus,
    delete_jobs,
    move,
    new_job_status,
)
from ._runlog import job_run

PublicJob: TypeAlias = dict[str, Any]
"""A job as the API shows it: the fields of :class:`judge._api_models.Job` (which validates it at
the route and is the one list of them), as plain data for the routes and the web. No lease
internals, no manifest, no server URLs; times as ISO 8601 text."""

EXIT_MEANINGS = {
    0: "every turn judged",
    1: "finished with some error rows",
    2: "bad input or options",
    3: "budget reached (resumable)",
    4: "nothing could be judged (every call failed)",
    5: "authentication failed or unknown model at the endpoint",
    6: "run locked by another worker or holding another run's results",
}


def iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    millis = int(moment % 1 * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{millis:03d}Z"


def public_job(row: JobRow) -> PublicJob:
    """A job as the API shows it: no lease internals, no manifest paths, no server URLs."""
    data = vars(row)
    progress = dict(data.get("progress") or {})
    summary = data.get("summary") or {}
    headline = None
    if data["kind"] in ("evaluate", "retry-errors") and summary:
        headline = {"tsa": summary.get("tsa"), "judge_jga": summary.get("judge_jga"),
                    "rule_agreement": {v: figures.get("agreement")
                                       for v, figures in (summary.get("rule") or {}).items()},
                    "error_turns": summary.get("error_turns"), "turns": summary.get("turns")}
    code = data.get("exit_code")
    return {
        "id": data["id"], "kind": data["kind"], "mode": data["mode"], "status": data["status"],
        "endpoint": data["endpoint"], "inputs": data["inputs"], "options": data["options"],
        "budget_usd": data["budget_usd"],
        "created_at": iso(data["created_at"]), "started_at": iso(data["started_at"]),
        "finished_at": iso(data["finished_at"]), "updated_at": iso(data["updated_at"]),
        "attempts": data["attempts"], "cancel_requested": bool(data["cancel_requested"]),
        "exit_code": code, "exit_meaning": EXIT_MEANINGS.get(code) if code is not None else None,
        "error": data["error"], "imported": bool(data["imported"]),
        "progress": {"total": progress.get("total"), "done": progress.get("done", 0),
                     "cache_hits": progress.get("cache_hits", 0),
                     "errors": progress.get("errors", 0),
                     "tokens": data["tokens_used"], "cost_usd": round(data["cost_usd"], 6),
                     "eta_seconds": progress.get("eta_seconds"),
                     "worker": progress.get("worker"),
                     **({"batches": progress["batches"]} if "batches" in progress else {})},
        "headline": headline,
    }


_SHOWN = [column for column in jobs.c if column.name != "manifest"]
"""The columns :func:`public_job` reads: a list of jobs need not decode each run's manifest."""


class JobStore:
    def __init__(self, db: Database, tokens: TokenBook | None = None) -> None:
        self.db = db
        self.tokens = tokens or TokenBook(db)

    # --- the API's side ------------------------------------------------------------------

    def submit(self, principal: Principal, spec: JobSpec) -> PublicJob:
        """Queue a checked job after resolving its references inside the caller's project."""
        self.check_references(principal.project_id, spec)
        self._check_spend_cap(principal)
        subject = self._subject(principal.project_id, spec)
        moment, job_id = now(), new_id("job")
        record = {"id": job_id, "project_id": principal.project_id,
                  "token_id": principal.token_id, "kind": spec.kind, "mode": spec.mode,
                  "status": new_job_status(JobStatus.QUEUED), "endpoint": spec.endpoint,
                  "inputs": spec.inputs, "options": spec.options, "budget_usd": spec.budget,
                  "created_at": moment, "updated_at": moment, "attempts": 0,
                  "cancel_requested": False, "cost_usd": 0.0, "tokens_used": 0, "imported": False,
                  "progress": {"done": 0}, "subject": subject}
        with self.db.write() as conn:
            conn.execute(jobs.insert().values(**record))
            notify_queue(conn)
        return self.get(principal.project_id, job_id)

    def _subject(self, project_id: str, spec: JobSpec) -> str | None:
        """What a judge run judges, recorded once so labels find it even after its
        predictions file is deleted: the file's sha256 (a retry: its source run's)."""
        with self.db.read() as conn:
            if spec.kind == "evaluate":
                return conn.execute(sa.select(files.c.sha256).where(
                    files.c.id == spec.inputs["predictions"],
                    files.c.project_id == project_id)).scalar()
            if spec.kind == "retry-errors":
                source = conn.execute(sa.select(jobs.c.id, jobs.c.subject).where(
                    jobs.c.id == spec.inputs["run"], jobs.c.project_id == project_id)).first()
                return subject_key(source.id, source.subject) if source is not None \
                    else None
        return None

    def check_references(self, project_id: str, spec: JobSpec) -> None:
        """Every file and run a job names exists in the project, of the right kind (422)."""
        with self.db.read() as conn:
            for where, refers, ref_id in spec.references:
                if refers == "job":
                    row = conn.execute(sa.select(jobs.c.kind, jobs.c.status, jobs.c.mode)
                                       .where(jobs.c.id == ref_id,
                                              jobs.c.project_id == project_id)).first()
                    if row is None:
                        raise ServiceError(f"no job {ref_id!r} in this project", status=422,
                                           field=where)
                    if row.kind not in ("evaluate", "retry-errors"):
                        raise ServiceError(f"job {ref_id!r} is a {row.kind} job, not a judge "
                                           "run", status=422, field=where)
                    if spec.kind == "retry-errors" and row.mode == "batch" and \
                            not _collected(conn, ref_id):
                        raise ServiceError(f"job {ref_id!r} ran through the Batch API and has "
                                           "no judged calls to retry (it never collected "
                                           "its batches, or a server before this version "
                                           "did); resume it or submit a new job",
                                           status=422, field=where)
                    wanted = WITH_RESULTS if spec.kind == "retry-errors" \
                        else (JobStatus.SUCCEEDED,)
                    if row.status not in wanted:
                        raise ServiceError(f"job {ref_id!r} is {row.status}; it must be "
                                           f"{' or '.join(wanted)}", status=422, field=where)
                else:
                    row = conn.execute(sa.select(files.c.kind).where(
                        files.c.id == ref_id, files.c.project_id == project_id)).first()
                    if row is None:
                        raise ServiceError(f"no file {ref_id!r} in this project", status=422,
                                           field=where)
                    if row.kind != refers:
                        raise ServiceError(f"file {ref_id!r} is a {row.kind} file; expected "
                                           f"{refers}", status=422, field=where)

    def _check_spend_cap(self, principal: Principal) -> None:
        if principal.spend_cap_usd is None:
            return
        spent = self.spent_by_token(principal.token_id)
        if spent >= principal.spend_cap_usd:
            raise ServiceError(f"this token's spending cap of {principal.spend_cap_usd} USD is "
                               f"reached ({spent:.4f} USD spent)", status=403)

    def spent_by_token(self, token_id: str) -> float:
        """What the reviewer of this token spent: every token of the same name in the
        project (a rotated token's jobs count, so rotating does not lift a spending cap)."""
        reviewer = TokenBook.same_reviewer(token_id)
        with self.db.read() as conn:
            return float(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(jobs.c.cost_usd), 0))
                                      .where(sa.or_(jobs.c.token_id == token_id,
                                                    jobs.c.token_id.in_(reviewer)))
                                      ).scalar() or 0.0)

    def row(self, project_id: str, job_id: str) -> JobRow:
        with self.db.read() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id,
                                                     jobs.c.project_id == project_id)).first()
        if row is None:
            raise ServiceError(f"no job {job_id!r} in this project", status=404)
        return JobRow.of(row)

    def get(self, project_id: str, job_id: str) -> PublicJob:
        with self.db.query() as conn:
            row = conn.execute(_GET, {"job": job_id, "project": project_id}).first()
        if row is None:
            raise ServiceError(f"no job {job_id!r} in this project", status=404)
        return public_job(JobRow.of(row))

    def list(self, project_id: str, *, status: str | None = None, kind: str | None = None,
             limit: int = 50, offset: int = 0) -> list[PublicJob]:
        query = (sa.select(*_SHOWN).where(jobs.c.project_id == project_id)
                 .order_by(jobs.c.created_at.desc(), jobs.c.id).limit(limit).offset(offset))
        if status:
            query = query.where(jobs.c.status == str(status))
        if kind:
            query = query.where(jobs.c.kind == kind)
        with self.db.query() as conn:
            return [public_job(JobRow.of(row)) for row in conn.execute(query)]

    def cancel(self, project_id: str, job_id: str) -> PublicJob:
        row = self.row(project_id, job_id)
        with self.db.write() as conn:
            if row.status in CANCELLABLE_AT_ONCE:
                move(conn, job_id, CANCELLABLE_AT_ONCE, JobStatus.CANCELLED, finished_at=now(),
                     updated_at=now(), cancel_requested=True, lease_owner=None)
            elif row.status == JobStatus.RUNNING:
                conn.execute(jobs.update().where(jobs.c.id == job_id)
                             .values(cancel_requested=True, updated_at=now()))
            elif row.status == JobStatus.WAITING:
                # due at once: the worker that claims it cancels the batches, then the job
                conn.execute(jobs.update().where(jobs.c.id == job_id,
                                                 jobs.c.status == JobStatus.WAITING.value)
                             .values(cancel_requested=True, wake_at=now(), updated_at=now()))
                notify_queue(conn)
        return self.get(project_id, job_id)

    def resume(self, project_id: str, job_id: str, budget: float | None) -> PublicJob:
        row = self.row(project_id, job_id)
        if row.status not in RESUMABLE:
            raise ServiceError(f"job is {row.status}; only a stopped, failed or cancelled job "
                               "can resume", status=409)
        values: dict[str, Any] = {"cancel_requested": False,
                                  "finished_at": None, "exit_code": None, "error": None,
                                  "updated_at": now(), "lease_owner": None}
        if budget is not None:
            values["budget_usd"] = budget
        with self.db.write() as conn:
            move(conn, job_id, RESUMABLE, JobStatus.QUEUED, **values)
            notify_queue(conn)
            # read in the same transaction: the job as resumed, not as a worker took it since
            return public_job(JobRow.of(conn.execute(sa.select(jobs).where(
                jobs.c.id == job_id)).one()))

    def delete(self, project_id: str, job_id: str) -> None:
        row = self.row(project_id, job_id)
        if row.status in ACTIVE:
            raise ServiceError(f"job is {row.status}; cancel it first", status=409)
        delete_jobs(self.db, [job_id])

    def refuse_if_in_use(self, project_id: str, file_id: str) -> None:
        """A file read by a queued or running job, or a run's review sample (its labels
        count for it), cannot be deleted (409)."""
        with self.db.read() as conn:
            sampled = conn.execute(sa.select(review_samples.c.job_id).where(
                review_samples.c.project_id == project_id,
                review_samples.c.file_id == file_id)).scalar()
            if sampled is not None:
                raise ServiceError(f"file is the review sample of run {sampled}; delete the "
                                   "run first", status=409)
            active = conn.execute(sa.select(jobs.c.id, jobs.c.inputs).where(
                jobs.c.project_id == project_id,
                jobs.c.status.in_([s.value for s in ACTIVE]))).all()
        for row in active:
            values = [v for value in row.inputs.values()
                      for v in ([value] if isinstance(value, str) else value)]
            if file_id in values:
                raise ServiceError(f"file is an input of {row.id}, which is not finished",
                                   status=409)

    def judgments(self, project_id: str, job_id: str, *, verdict: bool | None = None,
                  error: bool | None = None, dialogue_id: str | None = None,
                  offset: int = 0, limit: int | None = None,
                  batch: int = 500) -> Iterator[dict[str, Any]]:
        """Per-turn rows in run order, read in batches (streamed to the client)."""
        query = self._judgments_query(project_id, job_id, judgments.c.row, verdict=verdict,
                                      error=error, dialogue_id=dialogue_id)
        for rows in _keyset_batches(self.db, query, offset, limit, batch, batch):
            yield from rows

    def judgment_lines(self, project_id: str, job_id: str, *, verdict: bool | None = None,
                       error: bool | None = None, dialogue_id: str | None = None,
                       offset: int = 0, limit: int | None = None) -> Iterator[bytes]:
        """The rows as JSON Lines, one chunk per batch, for the download: the stored JSON text
        is sent as it is (no parse and re-dump of every row), the first batch is small so the
        first byte leaves at once, and only one batch is ever held in memory."""
        text = sa.cast(judgments.c.row, sa.Text)
        query = self._judgments_query(project_id, job_id, text, verdict=verdict, error=error,
                                      dialogue_id=dialogue_id)
        for rows in _keyset_batches(self.db, query, offset, limit, 50, 1000):
            yield "".join(f"{line}\n" for line in rows).encode("utf-8")

    def _judgments_query(self, project_id: str, job_id: str, column: Any, *,
                         verdict: bool | None, error: bool | None,
                         dialogue_id: str | None) -> Any:
        """The filtered rows of a job (404 first when the project has no such job)."""
        with self.db.query() as conn:
            found = conn.execute(sa.select(jobs.c.id).where(
                jobs.c.id == job_id, jobs.c.project_id == project_id)).first()
        if found is None:
            raise ServiceError(f"no job {job_id!r} in this project", status=404)
        query = sa.select(judgments.c.seq, column.label("row")).where(
            judgments.c.job_id == job_id)
        if verdict is not None:
            query = query.where(judgments.c.verdict == verdict)
        if error is not None:
            query = query.where(judgments.c.has_error == error)
        if dialogue_id is not None:
            query = query.where(judgments.c.dialogue_id == dialogue_id)
        return query

    def run(self, project_id: str, job_id: str) -> Run:
        """A finished judge job of the project as a run, read through its run store (what the
        analysis jobs read, :func:`~judge.service.jobs.job_run`); 404 for another project's
        job, an :class:`InputError` for one without judgments."""
        return job_run(self.db, project_id, job_id)

    def calls(self, job_id: str) -> builtins.list[dict[str, Any]]:
        with self.db.read() as conn:
            return [r.record for r in conn.execute(
                sa.select(job_calls.c.record).where(job_calls.c.job_id == job_id)
                .order_by(job_calls.c.custom_id))]

    def artifact(self, project_id: str, job_id: str, name: str) -> tuple[str, bytes]:
        self.row(project_id, job_id)
        with self.db.read() as conn:
            row = conn.execute(sa.select(artifacts).where(artifacts.c.job_id == job_id,
                                                          artifacts.c.name == name)).first()
        if row is None:
            raise ServiceError(f"job {job_id!r} has no artifact {name!r}", status=404)
        return row.content_type, row.data

    def usage(self, project_id: str) -> dict[str, Any]:
        """Jobs, cost and tokens of the project and of each reviewer (token name: a rotated
        token's jobs stay its reviewer's); ``token_id`` is the reviewer's live token."""
        query = (sa.select(jobs.c.token_id, sa.func.count().label("jobs"),
                           sa.func.coalesce(sa.func.sum(jobs.c.cost_usd), 0).label("cost"),
                           sa.func.coalesce(sa.func.sum(jobs.c.tokens_used), 0).label("tok"))
                 .where(jobs.c.project_id == project_id).group_by(jobs.c.token_id))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        known = {r.id: r for r in self.tokens.of_project(project_id)}
        live = {r.name: r for r in known.values() if r.revoked_at is None}
        per_name: dict[Any, dict[str, Any]] = {}
        for r in rows:
            token = known.get(r.token_id)
            name = token.name if token is not None else None
            current = live.get(name) or token
            entry = per_name.setdefault(name if name is not None else r.token_id, {
                "token_id": current.id if current is not None else r.token_id, "name": name,
                "spend_cap_usd": current.spend_cap_usd if current is not None else None,
                "jobs": 0, "cost_usd": 0.0, "tokens": 0})
            entry["jobs"] += r.jobs
            entry["cost_usd"] = round(entry["cost_usd"] + float(r.cost), 6)
            entry["tokens"] += int(r.tok)
        per_token = list(per_name.values())
        return {"project": {"jobs": sum(t["jobs"] for t in per_token),
                            "cost_usd": round(sum(t["cost_usd"] for t in per_token), 6),
                            "tokens": sum(t["tokens"] for t in per_token)},
                "tokens": per_token}

    def counts(self) -> dict[str, int]:
        with self.db.read() as conn:
            rows = conn.execute(sa.select(jobs.c.status, sa.func.count())
                                .group_by(jobs.c.status)).all()
        return {status: int(n) for status, n in rows}


def _collected(conn: sa.Connection, job_id: str) -> bool:
    """Whether a batch job stored a run manifest (it collected its batches): only then has it
    judged calls that ``retry-errors`` can continue from. Its manifest is read only here."""
    manifest = conn.execute(sa.select(jobs.c.manifest).where(jobs.c.id == job_id)).scalar()
    return isinstance(manifest, dict) and manifest.get("kind") == "evaluate"


_GET = sa.select(*_SHOWN).where(jobs.c.id == sa.bindparam("job", type_=sa.String),
                               jobs.c.project_id == sa.bindparam("project", type_=sa.String))
"""A job as the API shows it (the most frequent request of clients polling), built once."""


def _keyset_batches(db: Any, query: Any, offset: int, limit: int | None, first: int,
                    most: int) -> Iterator[list[Any]]:
    """The ``row`` column of ``query``'s rows in ``seq`` order, a batch per short read
    transaction (keyset on the primary key, so no batch rescans the ones before it); batches
    grow from ``first`` to ``most`` rows."""
    sent, skip, last, size = 0, offset, -1, first
    while limit is None or sent < limit:
        step = size if limit is None else min(size, limit - sent)
        with db.read() as conn:
            rows = conn.execute(query.where(judgments.c.seq > last)
                                .order_by(judgments.c.seq).limit(step + skip)).all()
        if not rows:
            return
        last = rows[-1].seq
        chunk = [row.row for row in rows[skip:]]
        sent += len(chunk)
        skip, size = 0, min(most, size * 4)
        if chunk:
            yield chunk
