"""Evaluate jobs in mode ``batch``: the calls go through the OpenAI Batch API (half price, up to
a day of latency) and the answers are collected into the same results as a live job's.

No worker waits on a batch. A batch job is a series of short visits, each one claim:

1. Prepare and submit: the job claims its requests in the project's ledger (as
   ``batch:<job id>``); what the ledger answers, or another job holds, gets no line. The plan is
   written as request files in the job's run directory (split at ``batch_max_requests`` /
   ``batch_max_bytes``, one batch each; a body shared by several calls is sent once). A file is
   submitted only when no recorded batch of the job carries its SHA-256; its row is written
   ``submitting`` first and gets the batch id the moment the API returns it (the pair is never
   interrupted by a cancel or a drain). A replica that dies after submitting leaves the ids
   behind: whoever takes the job over polls them and submits nothing again; a row left
   ``submitting`` is resolved by looking the batch up by its metadata.
2. Park: the job becomes ``waiting`` with ``wake_at`` = now + ``batch_poll_seconds``; it holds
   no lease and no slot. Any replica's worker claims it when it is due.
3. Poll: the unfinished batches' status and request counts are stored (the job's progress shows
   them), and the job is parked again until every batch has ended.
4. Collect: the output files are downloaded and read with the same reply checks as live
   replies; what they paid for goes into the ledger, the calls left out are answered from it
   (the job parks again while another job still holds some of them), and
   :func:`judge.pipeline.collect` integrates all of it into the job's run store, as a live
   job's run is kept (``retry-errors`` continues from it): :mod:`._batchcollect`.

Cancelling asks the API to cancel every batch still running, then ends the job as cancelled.
The request files are rebuilt from the inputs on every visit that needs them (the plan is
deterministic), so a visit on another machine needs nothing but the database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..._config import JudgeConfig, load_config
from ..._digest import file_digest
from ..._errors import DatabaseUnavailable, DSTJudgeError, ModelError
from ..._tasks import run_to_end
from ...model import cancel, find_batch, status, submit
from ...pipeline import dry_run, plan_evaluation, write_requests
from ...store import cache_key
from ..db import Database, JobRow, job_batches, jobs, now
from ..jobs import BATCH_OPTIONS, JUDGE_OPTIONS, JobStatus, endpoint_for
from ..ledger import BATCH_CLAIM_SECONDS, DatabaseLedger, batch_owner
from ._batchcollect import collect_job
from ._evaluate import EvaluateRunner
from ._inputs import Inputs
from ._runners import Live, Outcome, Park, RunContext, Toolkit

log = logging.getLogger("dst_judge.service")
ENDED = ("completed", "failed", "expired", "cancelled")
"""Batch statuses after which nothing changes (``cancelling`` and ``finalizing`` still do)."""
SUBMITTING = "submitting"
"""The status of a request file's row from just before its submission until the provider's
batch id replaces it: a row left in this state means a submitter died or lost the reply, and
the provider is asked (by the batch's metadata) whether the batch exists before anything is
sent again."""
MAX_RETRIES = 20
"""Visits in a row that may fail on a transient API error (a 5xx, 429, no connection)."""
MANIFEST_KIND = "batch-requests"


def _transient(exc: ModelError) -> bool:
    return exc.status is None or exc.status in (408, 409, 429) or exc.status >= 500


@dataclass
class BatchLive(Live):
    """A batch job's counters: the live ones plus its batches."""

    batches: dict[str, int] = field(default_factory=dict)

    def as_progress(self) -> dict[str, Any]:
        return {**super().as_progress(), "batches": dict(self.batches)}


def batch_rows(db: Database, job_id: str) -> list[dict[str, Any]]:
    """The batches a job submitted, in request-file order."""
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(
            sa.select(job_batches).where(job_batches.c.job_id == job_id)
            .order_by(job_batches.c.part, job_batches.c.created_at))]


def _figures(rows: list[dict[str, Any]], files: int | None) -> dict[str, int]:
    """What the job's progress shows of its batches."""
    out = [r for r in rows if r["status"] != SUBMITTING]
    return {"files": files if files is not None else len({r["part"] for r in rows}),
            "submitted": len(out),
            "ended": sum(r["status"] in ENDED for r in out),
            "requests": sum(r["requests"] for r in out),
            "requests_done": sum(r["completed"] + r["failed"] for r in out)}


def _planned(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the job decided to submit (its request files' digests, the calls the ledger
    answered): the manifest itself until the job is collected, then kept inside the run
    manifest that replaces it."""
    if not isinstance(manifest, dict):
        return None
    if manifest.get("kind") == MANIFEST_KIND:
        return manifest
    inner = manifest.get("batch")
    return inner if isinstance(inner, dict) and inner.get("kind") == MANIFEST_KIND else None


def _tags(job_id: str, digest: str) -> dict[str, str]:
    """The metadata a job's batch carries at the provider, to be found again by it."""
    return {"dst_judge_job": job_id, "dst_judge_file": digest}


class BatchRunner:
    """One visit of a batch job (see the module's description)."""

    progress = BatchLive

    def __init__(self, tools: Toolkit, evaluator: EvaluateRunner) -> None:
        self.db = tools.db
        self.settings = tools.settings
        self.store = tools.store
        self.queue = tools.queue
        self.evaluator = evaluator

    async def run(self, job: JobRow, context: RunContext) -> Outcome | Park:
        live = context.live
        if not isinstance(live, BatchLive):
            raise TypeError("a batch job keeps BatchLive counters")
        worker_id, cancel_requested = context.worker_id, context.cancel_requested
        inputs = Inputs(self.db, self.store, job.project_id)
        live.batches = dict((job.progress or {}).get("batches") or {})
        try:
            outcome = await self._visit(job, worker_id, live, inputs, cancel_requested)
        except DatabaseUnavailable:
            raise  # its claims and batches stay: the visit is made again when it is back
        except ModelError as exc:
            retries = int(live.batches.get("retries", 0)) + 1
            if _transient(exc) and retries <= MAX_RETRIES:
                log.warning("job %s: the Batch API failed (%s); trying again later", job.id,
                            exc)
                live.batches["retries"] = retries
                return Park(now() + self.settings.batch_poll_seconds)
            await self._release(job)
            return Outcome(JobStatus.FAILED, 5 if exc.status in (401, 403, 404) else 4,
                           inputs.clean(str(exc)))
        except DSTJudgeError as exc:
            await self._release(job)
            return Outcome(JobStatus.FAILED, 2, inputs.clean(str(exc)))
        except Exception:
            await self._release(job)
            raise
        live.batches.pop("retries", None)
        return outcome

    def config(self, job: JobRow) -> tuple[str, JudgeConfig]:
        """The job's judge configuration, as a live job of the same options would have it."""
        name, endpoint = endpoint_for(job.endpoint, self.settings)
        values = {k: v for k, v in dict(job.options).items()
                  if k in (*JUDGE_OPTIONS, *BATCH_OPTIONS)}
        values.update(base_url=endpoint.base_url, api_key=endpoint.secret(),
                      organization=endpoint.organization, project=endpoint.project,
                      prices=endpoint.prices, http_backend=endpoint.http_backend,
                      use_cache=False)
        return name, load_config(values)

    async def _visit(self, job: JobRow, worker_id: str, live: BatchLive, inputs: Inputs,
                     cancel_requested: Callable[[], bool]) -> Outcome | Park:
        endpoint_name, config = self.config(job)
        rows = await asyncio.to_thread(batch_rows, self.db, job.id)
        if any(r["status"] == SUBMITTING for r in rows):
            rows = await self._settle(config, job.id, rows)
        planned = _planned(job.manifest)
        if planned is not None:
            live.total = planned["calls"]
        live.batches.update(_figures(rows, len(planned["files"]) if planned else None))
        if cancel_requested():
            return await self._cancel(config, job, rows, live)
        loaded: dict[str, Any] | None = None
        if planned is None or set(planned["files"]) - {r["sha256"] for r in rows}:
            loaded = await self._load(job, inputs, config)
            if planned is None:  # the first plan: what the ledger answers gets no line
                loaded["answered"] = await self._claim(job, loaded["keys"])
            else:  # as decided then: the files must come out as their digests say
                loaded["answered"] = set(planned.get("answered") or ())
            if not rows:  # nothing submitted yet: the whole run must fit the budget
                over = await asyncio.to_thread(self._over_budget, job, loaded)
                if over is not None:
                    await self._release(job)
                    return Outcome(JobStatus.STOPPED, 3, over)
            stopped = await self._submit(job, worker_id, config, loaded, rows, live,
                                         cancel_requested)
            if stopped is not None:
                return stopped
            rows = await asyncio.to_thread(batch_rows, self.db, job.id)
            planned = loaded["planned"]
        rows = await self._poll(config, rows, live)
        if cancel_requested():
            return await self._cancel(config, job, rows, live)
        if not all(r["status"] in ENDED for r in rows):
            return Park(now() + self.settings.batch_poll_seconds)
        if loaded is None:  # read once a visit: a job with nothing to submit collects at once
            loaded = await self._load(job, inputs, config)
            loaded["answered"] = set((planned or {}).get("answered") or ())
        return await collect_job(job, config, endpoint_name, loaded, rows, live, inputs,
                                 db=self.db, ledger=self._ledger(job),
                                 run_dir=self.evaluator.run_dir(job.id),
                                 planned=loaded.get("planned") or planned,
                                 poll_seconds=self.settings.batch_poll_seconds)

    def _ledger(self, job: JobRow) -> DatabaseLedger:
        """The project's ledger, as the owner of this batch job's claims."""
        return self.evaluator.ledger(job, owner=batch_owner(job.id),
                                     lease=BATCH_CLAIM_SECONDS)

    async def _claim(self, job: JobRow, keys: dict[str, str]) -> set[str]:
        """Claim in the project's ledger the requests this job will submit; returns the calls
        (custom ids) that need no line: the ledger holds their reply, or another
        job holds their request (a live one on the wire, or another batch). A batch job is
        judged from one plan, so this is decided once, before the first request file is
        written."""
        ours = await asyncio.to_thread(self._ledger(job).claim_many, keys.values(),
                                       until=now() + BATCH_CLAIM_SECONDS)
        return {custom for custom, key in keys.items() if key not in ours}

    async def _release(self, job: JobRow) -> None:
        """Give up the job's claims (it ends without its batches' replies): nobody waits on
        them any longer."""
        try:
            released = await asyncio.to_thread(self._ledger(job).release_all)
        except DSTJudgeError as exc:
            log.warning("job %s: its ledger claims could not be released (%s); they lapse",
                        job.id, exc)
            return
        if released:
            log.info("job %s: released %d ledger claim(s)", job.id, released)

    async def _load(self, job: JobRow, inputs: Inputs, config: JudgeConfig) -> dict[str, Any]:
        """The job's inputs and plan, read and made in one thread hop, and each call's key in
        the ledger (custom id → key: worked out once, as it hashes the whole request body)."""
        def load() -> dict[str, Any]:
            schema, dialogues, predictions, rules, sources = self.evaluator.read_inputs(
                job.inputs, dict(job.options), inputs)
            dialogues, corrected = self.evaluator.corrected(job.inputs, dialogues, schema,
                                                            sources, inputs)
            plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
            keys = {call.custom_id: cache_key(config.endpoint, call.body,
                                              call.prompt.template_hash) for call in plan.calls}
            return {"schema": schema, "dialogues": dialogues, "predictions": predictions,
                    "rules": rules, "plan": plan, "sources": sources, "keys": keys,
                    "corrected": corrected}

        return await asyncio.to_thread(load)

    def _over_budget(self, job: JobRow, loaded: dict[str, Any]) -> str | None:
        """Why the job may not submit its batches, if its estimated Batch API cost exceeds
        its budget (capped by its token's spending cap). A batch is paid as a whole once it
        runs, so the budget is checked before anything goes out, on the estimate's figures
        (prompt tokens counted with the model's tokenizer, replies at their assumed length)."""
        budget = self.evaluator.budget(job)
        if budget is None:
            return None
        keys = loaded["keys"]
        answered = {keys[custom] for custom in loaded["answered"] if custom in keys}
        cost = dry_run(loaded["plan"], cached_keys=answered)["cost_usd"]["batch"]
        if cost is None or cost <= budget:
            return None
        return (f"budget reached before submitting: the batches would cost about "
                f"{cost:.4f} USD (estimate), over the budget of {budget:.4f} USD; raise the "
                "budget and resume the job")

    # --- submission ---------------------------------------------------------------------------

    async def _submit(self, job: JobRow, worker_id: str, config: JudgeConfig,
                      loaded: dict[str, Any], rows: list[dict[str, Any]], live: BatchLive,
                      cancel_requested: Callable[[], bool]) -> Outcome | Park | None:
        """Write the request files and submit each one no recorded batch carries (their
        digests are kept in the job's manifest first); None when all are out."""
        folder = self.evaluator.run_dir(job.id) / "batch"
        folder.mkdir(parents=True, exist_ok=True)
        written = await asyncio.to_thread(write_requests, loaded["plan"],
                                          folder / "requests.jsonl",
                                          answered=loaded["answered"])
        digests = [await asyncio.to_thread(file_digest, path) for path in written.files] \
            if written.requests else []
        planned = {"kind": MANIFEST_KIND, "files": digests, "counts": written.counts,
                   "calls": written.calls, "duplicates": written.duplicates,
                   "answered": sorted(loaded["answered"])}
        loaded["planned"] = planned
        if job.manifest != planned:
            await asyncio.to_thread(self.queue.store_manifest, job.id, planned)
        live.total = written.calls
        live.batches.update(_figures(rows, len(digests)))
        recorded = {r["sha256"] for r in rows}
        for part, (path, count, digest) in enumerate(
                zip(written.files, written.counts, digests, strict=False), start=1):
            if digest in recorded:
                continue
            if cancel_requested():
                return await self._cancel(config, job, await asyncio.to_thread(
                    batch_rows, self.db, job.id), live)
            if not await asyncio.to_thread(self._holds_lease, job.id, worker_id):
                return Park(now())  # another worker owns the job now: parking it is a no-op
            if digest in {r["sha256"] for r in await asyncio.to_thread(batch_rows, self.db,
                                                                       job.id)}:
                continue
            await run_to_end(self._submit_one(job.id, config, path, part, digest, count))
            recorded.add(digest)
            live.batches.update(_figures(await asyncio.to_thread(batch_rows, self.db, job.id),
                                         len(digests)))
        return None

    async def _submit_one(self, job_id: str, config: JudgeConfig, path: Path, part: int,
                          digest: str, count: int) -> None:
        """Submit one request file, bracketed by its row: ``submitting`` before the provider
        is asked, its batch id after. If the reply is lost or this process dies in between,
        the next visit finds the batch by its metadata (:meth:`_settle`) instead of paying
        for it twice."""
        moment = now()
        held = f"{SUBMITTING}:{digest[:40]}"  # the batch's id until the provider gives one
        placeholder = {"job_id": job_id, "batch_id": held,
                       "part": part, "sha256": digest, "requests": count,
                       "status": SUBMITTING, "completed": 0, "failed": 0,
                       "created_at": moment, "updated_at": moment}
        await asyncio.to_thread(self._replace, job_id, None, placeholder)
        batch = await submit(config, path, metadata=_tags(job_id, digest))
        row = self._row_of(batch, placeholder)
        for attempt in range(10):  # the batch is paid for: its id must reach the database
            try:
                await asyncio.to_thread(self._replace, job_id, held, row)
                break
            except Exception:
                if attempt == 9:
                    log.error("job %s: batch %s could not be recorded (found again by its "
                              "metadata on the next visit)", job_id, row["batch_id"])
                    raise
                await asyncio.sleep(0.5 * (attempt + 1))
        log.info("job %s: batch %s submitted (%d requests)", job_id, row["batch_id"], count)

    @staticmethod
    def _row_of(batch: dict[str, Any], placeholder: dict[str, Any]) -> dict[str, Any]:
        """The row of a batch the provider created for a request file."""
        counts = batch.get("request_counts") or {}
        return {**placeholder, "batch_id": str(batch.get("id")),
                "status": str(batch.get("status")),
                "completed": int(counts.get("completed") or 0),
                "failed": int(counts.get("failed") or 0), "updated_at": now()}

    async def _settle(self, config: JudgeConfig, job_id: str, rows: list[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
        """Resolve the rows a submission left ``submitting``: the provider's batch carrying the
        file's metadata takes the row's place; with none, the row goes and the file is
        submitted again (it never reached the provider)."""
        for row in rows:
            if row["status"] != SUBMITTING:
                continue
            found = await find_batch(config, _tags(job_id, row["sha256"]),
                                     since=row["created_at"])
            if found is None:
                log.info("job %s: request file %d never became a batch; submitting it again",
                         job_id, row["part"])
                await asyncio.to_thread(self._replace, job_id, row["batch_id"], None)
            else:
                log.info("job %s: batch %s of request file %d found at the provider",
                         job_id, found.get("id"), row["part"])
                await asyncio.to_thread(self._replace, job_id, row["batch_id"],
                                        self._row_of(found, row))
        return await asyncio.to_thread(batch_rows, self.db, job_id)

    def _replace(self, job_id: str, old_id: str | None, row: dict[str, Any] | None) -> None:
        """In one transaction: delete the job's row ``old_id``, insert ``row``."""
        with self.db.write() as conn:
            if old_id is not None:
                conn.execute(job_batches.delete().where(job_batches.c.job_id == job_id,
                                                        job_batches.c.batch_id == old_id))
            if row is not None:
                conn.execute(job_batches.insert().values(**row))

    def _holds_lease(self, job_id: str, worker_id: str) -> bool:
        with self.db.read() as conn:
            owner = conn.execute(sa.select(jobs.c.lease_owner, jobs.c.status)
                                 .where(jobs.c.id == job_id)).first()
        return owner is not None and owner.lease_owner == worker_id \
            and owner.status == JobStatus.RUNNING

    # --- polling, cancelling, collecting ------------------------------------------------------

    async def _poll(self, config: JudgeConfig, rows: list[dict[str, Any]], live: BatchLive
                    ) -> list[dict[str, Any]]:
        """Ask the API about every batch not yet ended; store what it says."""
        for row in rows:
            if row["status"] in ENDED or row["status"] == SUBMITTING:
                continue
            batch = await status(config, row["batch_id"])
            self._update(row, batch)
        await asyncio.to_thread(self._store_status, rows)
        live.batches.update(_figures(rows, live.batches.get("files")))
        return rows

    @staticmethod
    def _update(row: dict[str, Any], batch: dict[str, Any]) -> None:
        counts = batch.get("request_counts") or {}
        row.update(status=str(batch.get("status")), updated_at=now(),
                   completed=int(counts.get("completed") or 0),
                   failed=int(counts.get("failed") or 0))

    def _store_status(self, rows: list[dict[str, Any]]) -> None:
        with self.db.write() as conn:
            for row in rows:
                conn.execute(job_batches.update().where(
                    job_batches.c.job_id == row["job_id"],
                    job_batches.c.batch_id == row["batch_id"]).values(
                        status=row["status"], completed=row["completed"],
                        failed=row["failed"], updated_at=row["updated_at"]))

    async def _cancel(self, config: JudgeConfig, job: JobRow, rows: list[dict[str, Any]],
                      live: BatchLive) -> Outcome:
        """Cancel every batch still running at the API, then the job."""
        problems = []
        for row in rows:
            if row["status"] in ENDED or row["status"] == SUBMITTING:
                continue
            try:
                self._update(row, await cancel(config, row["batch_id"]))
            except ModelError as exc:
                problems.append(str(exc))
        await asyncio.to_thread(self._store_status, rows)
        live.batches.update(_figures(rows, live.batches.get("files")))
        await self._release(job)
        note = f" (the API refused: {problems[0]})" if problems else ""
        log.info("job %s: cancelled with its %d batch(es)%s", job.id, len(rows), note)
        return Outcome(JobStatus.CANCELLED, None, "cancelled on request" + note)
