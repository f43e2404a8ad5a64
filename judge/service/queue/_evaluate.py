"""evaluate and retry-errors jobs run live: the library's run
(:func:`judge.pipeline.evaluate_async`) on inputs unpacked from the database, with the run log
kept in the database itself (:class:`~judge.service.jobs.JobRunLog`: the manifest in
``jobs.manifest``, every finished call in ``job_calls`` as it happens), so a job that moves to
another worker re-sends only the calls that were in flight. Its model requests go through the
ledger in the service database (:mod:`judge.service.ledger`), shared by every job and replica of the
project, where each reply is committed the moment it arrives.

:func:`judged` is the one finish step of a judge run, live or batch (:mod:`._batchjob`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._config import load_config, public_url
from ..._errors import (
    BudgetReached,
    DatabaseUnavailable,
    DSTJudgeError,
    InputError,
    ModelError,
    StoreError,
)
from ...data import CorrectedGold, DialogueSet, Schema, apply_each, load_predictions
from ...model import AiohttpTransport, ReplyLimits, Transport
from ...pipeline import EvaluationResult, RunEnvironment, evaluate_async
from ...store import LEDGER_FILE, SQLiteLedger
from ..db import JobRow
from ..jobs import JUDGE_OPTIONS, JobRunLog, JobStatus, endpoint_for, run_input_files
from ..ledger import SHARED_SCOPE, DatabaseLedger, replay_transport_for, worker_owner
from ._inputs import (
    Inputs,
    ParsedFiles,
    corrections_summary,
    ids_of,
    read_correction_files,
    scrub_summary,
    stem,
    subset,
)
from ._lease import Records
from ._runners import Journal, Live, Outcome, RunContext, Toolkit

log = logging.getLogger("dst_judge.service")


@dataclass
class _Start:
    """What :meth:`EvaluateRunner._start` prepares for a job's run."""

    endpoint: str
    config: Any
    schema: Any
    dialogues: Any
    predictions: Any
    rules: Any
    resume: bool
    sources: dict[str, Any]
    ledger: DatabaseLedger
    run_log: JobRunLog
    corrected: list[CorrectedGold] = field(default_factory=list)


class EvaluateRunner:
    """evaluate and retry-errors jobs."""

    progress = Live

    def __init__(self, tools: Toolkit) -> None:
        self.db = tools.db
        self.settings = tools.settings
        self.store = tools.store
        self.jobs = tools.jobs
        self.queue = tools.queue
        self.worker_id = tools.worker_id
        self._importing = threading.Lock()
        self.parsed = ParsedFiles()
        self._configs: dict[str, Any] = {}
        self._configs_lock = threading.Lock()
        self._transports: dict[tuple[Any, ...], Transport] = {}

    def ledger_scope(self, project_id: str) -> str:
        """Whose paid replies a project's jobs share: its own, or every project's when the
        operator shares them (a hit then reveals that another project sent the request)."""
        return SHARED_SCOPE if self.settings.share_cache_across_projects else project_id

    def ledger(self, job: JobRow, *, owner: str | None = None,
               lease: float | None = None) -> DatabaseLedger:
        """The job's view of the ledger in the service database, the one record of paid replies
        every job and replica of the scope shares. Its claims are the job's own (a second job
        of this worker waits for them like any other owner) and expire a lease after this
        worker stops renewing them, as the job's own lease does (a batch job passes its own
        ``owner`` and ``lease``)."""
        ledger = DatabaseLedger(self.db, self.ledger_scope(job.project_id),
                                owner=owner or worker_owner(self.worker_id, job.id),
                                lease=lease or self.settings.lease_seconds)
        self._import_cache_dir(ledger)
        return ledger

    def _import_cache_dir(self, ledger: DatabaseLedger) -> None:
        """Move the replies of the reply cache directory that earlier versions kept per replica
        (``<data_dir>/cache/<project id | shared>``) into the database once: they were paid
        for. The directory is renamed ``*.imported-<time>`` afterwards (kept, not deleted)."""
        name = "shared" if ledger.scope == SHARED_SCOPE else ledger.scope
        folder = self.settings.data_dir / "cache" / name
        with self._importing:
            if not (folder / LEDGER_FILE).is_file():
                return
            try:
                old = SQLiteLedger(folder / LEDGER_FILE)
                try:
                    added = ledger.import_replies(
                        ((key, reply.content) for key in sorted(old.keys())
                         if (reply := old.get(key)) is not None), origin="cache-dir")
                finally:
                    old.close()
                folder.rename(folder.with_name(f"{name}.imported-{int(time.time())}"))
            except (OSError, StoreError) as exc:  # the job runs on; the next one tries again
                log.warning("could not import the replies of %s: %s", folder, exc)
                return
        log.info("imported %d paid replies of %s into the service's ledger", added, folder)

    def transport(self, config: Any) -> Transport | None:
        """The worker's pool of connections to ``config``'s endpoint (aiohttp backend), kept
        alive across its jobs: a job's first request then needs no new connection, nor does
        its end close any. One per timeout and reply cap, as those are the pool's; unbounded,
        as every job bounds its own calls in flight. Event loop only."""
        if config.http_backend != "aiohttp":
            return None  # the httpx backend: each job opens its own client, as the CLI does
        max_bytes = ReplyLimits.from_config(config).max_bytes
        key = (config.endpoint, config.timeout, max_bytes)
        transport = self._transports.get(key)
        if transport is None:
            transport = self._transports[key] = AiohttpTransport(
                timeout=config.timeout, connections=0, max_bytes=max_bytes)
        return transport

    async def aclose(self) -> None:
        """Close the shared connection pools (the worker stops)."""
        transports, self._transports = self._transports, {}
        for transport in transports.values():
            await transport.aclose()

    def run_dir(self, job_id: str) -> Path:
        """The job's folder for files it hands to others (a batch job's request files)."""
        return self.settings.data_dir / "runs" / job_id

    async def run(self, job: JobRow, context: RunContext) -> Outcome:
        source, seed_job = job, None
        if job.kind == "retry-errors":
            seed_job = source = self.jobs.row(job.project_id, job.inputs["run"])
            while source.kind == "retry-errors":
                source = self.jobs.row(job.project_id, source.inputs["run"])
        options = {**dict(source.options), **dict(job.options)}
        inputs = Inputs(self.db, self.store, job.project_id)
        try:
            return await self._run(job, source, seed_job, options, inputs, context)
        except DatabaseUnavailable:
            raise  # not the job's fault: it waits for the database (see the worker)
        except BudgetReached as exc:
            return Outcome(JobStatus.STOPPED, 3, f"{exc}; raise the budget and resume the job")
        except ModelError as exc:
            if exc.fatal:
                return Outcome(JobStatus.FAILED, 5, inputs.clean(str(exc)))
            return Outcome(JobStatus.FAILED, 4, inputs.clean(str(exc)))
        except DSTJudgeError as exc:
            return Outcome(JobStatus.FAILED, 2, inputs.clean(str(exc)))

    async def _run(self, job: JobRow, source: Any, seed_job: Any, options: dict[str, Any],
                   inputs: Inputs, context: RunContext) -> Outcome:
        live = context.live
        start = await asyncio.to_thread(self._start, job, source, seed_job, options, inputs,
                                        context.journal)

        def on_progress(progress: Any) -> None:
            if live.done_at_start is None:
                live.done_at_start = progress.done - 1
            live.total, live.done = progress.total, progress.done
            live.cache_hits, live.errors = progress.cache_hits, progress.errors
            spend = progress.spend
            if spend is not None:
                live.cost = spend.usd
                live.tokens = spend.prompt_tokens + spend.completion_tokens

        endpoint_name = start.endpoint
        environment = RunEnvironment(
            ledger=start.ledger, limiter=context.limiter_for(endpoint_name),
            transport=replay_transport_for(self.settings, endpoint_name)
            or self.transport(start.config), on_progress=on_progress)
        # the run log's last records reach the database with the job's outcome (the worker
        # takes them from the journal), or with the journal's next batch if the job is cancelled
        result = await evaluate_async(
            start.config, start.schema, start.dialogues, start.predictions,
            rules=start.rules, store=start.run_log, resume=start.resume, sources=start.sources,
            refresh=job.kind == "retry-errors", environment=environment)
        return judged(result, endpoint_name, inputs, start.corrected, live)

    def _start(self, job: JobRow, source: Any, seed_job: Any, options: dict[str, Any],
               inputs: Inputs, journal: Journal) -> _Start:
        """Everything a job needs before its first call, in one thread hop: its inputs read
        and parsed, its configuration, its run log as the database holds it (a retry's seeded
        from the run it retries), its ledger."""
        endpoint_name, endpoint = endpoint_for(source.endpoint, self.settings)
        with self.db.read() as conn:  # an imported run's: the project's files of its digests
            input_files = run_input_files(conn, job.project_id, source)
        schema, dialogues, predictions, rules, sources = self.read_inputs(
            input_files, options, inputs)
        dialogues, corrected = self.corrected(source.inputs, dialogues, schema, sources, inputs)
        values = {k: v for k, v in options.items() if k in JUDGE_OPTIONS}
        values.setdefault("concurrency", min(8, endpoint.max_concurrency))
        values.update(base_url=endpoint.base_url, api_key=endpoint.secret(),
                      organization=endpoint.organization, project=endpoint.project,
                      prices=endpoint.prices, http_backend=endpoint.http_backend,
                      budget=self.budget(job))
        config = self._config(values)
        seed = self.jobs.calls(job.id)
        manifest = job.manifest
        if seed_job is not None and not seed and manifest is None:
            seed = [c for c in self.jobs.calls(seed_job.id) if not c.get("error")]
            manifest = seed_job.manifest
            if seed_job.imported:
                manifest = imported_manifest(manifest, config, dialogues, sources)
            if manifest is not None:
                self.queue.store_manifest(job.id, manifest)
                self.queue.record_calls(job.id, seed)
        if manifest is None:
            seed = []  # calls logged without a manifest belong to no run this one continues
        run_log = JobRunLog(self.db, job.id, writer=journal, held=(manifest, seed))
        return _Start(endpoint_name, config, schema, dialogues, predictions, rules,
                      manifest is not None, sources, self.ledger(job), run_log, corrected)

    def _config(self, values: dict[str, Any]) -> Any:
        """The run's configuration; jobs with the same options share one (it is frozen), as
        building one costs milliseconds of the event loop's interpreter."""
        key = json.dumps(values, sort_keys=True, default=str)
        with self._configs_lock:  # jobs start in several threads at once
            config = self._configs.get(key)
        if config is None:
            config = load_config(values)
            with self._configs_lock:
                if len(self._configs) >= 64:
                    self._configs.pop(next(iter(self._configs)))
                self._configs[key] = config
        return config

    def budget(self, job: JobRow) -> float | None:
        """The job's budget, capped by what its token may still spend (looked up in the
        thread that prepares the job: no hop of its own)."""
        budget: float | None = job.budget_usd
        if job.token_id is None:
            return budget
        cap = self.jobs.tokens.spend_cap(job.token_id)
        if cap is None:
            return budget
        spent = self.jobs.spent_by_token(job.token_id) - float(job.cost_usd or 0.0)
        remaining = max(cap - spent, 1e-9)
        return remaining if budget is None else min(budget, remaining)

    def read_inputs(self, files: dict[str, Any], options: dict[str, Any], inputs: Inputs
                    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """A judge run's schema, dialogues (the ``limit``/``dialogue_ids`` subset),
        predictions and rules from its input file ids (one query), and the names its summary
        shows as their sources; live and batch jobs read them alike."""
        inputs.prefetch([files.get(k) for k in ("schema", "dialogues", "predictions", "rules")])
        schema_path, schema_row = inputs.path(files["schema"])
        dialogues_path, _ = inputs.path(files["dialogues"])
        predictions_path, pred_row = inputs.path(files["predictions"])
        rules_id = files.get("rules")
        rules_path, rules_row = inputs.path(rules_id) if rules_id else (None, None)
        parsed = self.parsed
        schema = parsed.schema(schema_path)
        dialogues = subset(parsed.dialogues(dialogues_path), options)
        name = (pred_row.get("info") or {}).get("system_name") or stem(pred_row["name"])
        predictions = load_predictions(predictions_path, dialogues, schema, name=name)
        rules = parsed.rules(rules_path) if rules_path else parsed.default_rules(schema_path)
        sources = {"schema": schema_row["name"],
                   "rules": rules_row["name"] if rules_row else None}
        return schema, dialogues, predictions, rules, sources

    @staticmethod
    def corrected(job_inputs: dict[str, Any], dialogues: DialogueSet, schema: Schema,
                  sources: dict[str, Any], inputs: Inputs
                  ) -> tuple[DialogueSet, list[CorrectedGold]]:
        """A judge run's dialogues with the corrected versions of its ``inputs.corrections``
        added (judged beside the file's own; live and batch jobs alike), named in ``sources``
        as the run's ``gold_corrections``."""
        correction_ids = ids_of(job_inputs.get("corrections"))
        if not correction_ids:
            return dialogues, []
        dialogues, corrected = apply_each(dialogues, read_correction_files(inputs, correction_ids),
                                          schema=schema)
        sources["gold_corrections"] = [c.name for c in corrected]
        return dialogues, corrected


def nothing_judged(summary: dict[str, Any]) -> str:
    """The one reason of a run that judged nothing: how many calls failed and the first
    call's error (they mostly fail alike: a wrong key, an unknown model, requests a replay
    endpoint never recorded), not the errors of several turns and calls run together."""
    calls = summary.get("calls") or {}
    examples = (summary.get("errors") or {}).get("examples") or []
    first = "no call was answered"
    if examples:
        text = _EXAMPLE_PREFIX.sub("", str(examples[0]), count=1)  # "<dialogue> turn <n>: "
        dimensions = [str(d) for d in summary.get("templates") or {}]
        for dimension in dimensions:
            text = text.removeprefix(f"{dimension}: ")
        cuts = [i for d in dimensions if (i := text.find(f"; {d}: ")) >= 0]
        first = text[:min(cuts)] if cuts else text
    return (f"nothing could be judged: {calls.get('failed', 'all')} of "
            f"{calls.get('planned', 'its')} calls failed; the first: {first}")


_EXAMPLE_PREFIX = re.compile(r"^.*? turn \d+: ")


def judged(result: EvaluationResult, endpoint: str, inputs: Inputs,
           corrected: list[CorrectedGold], live: Live, *,
           calls: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
           records: Records | None = None) -> Outcome:
    """The one finish step of a judge run, live or batch: its summary cleaned of server paths
    (options keep the endpoint's name), with the corrected gold it used, its ``calls``
    figures and the ``extra`` sections of its mode (a batch job's batches); the job's final
    counters; failed when no turn could be judged, else succeeded (exit 1 when some turns
    failed). The rows are cleaned in the thread that writes the outcome. ``records``: the
    run log the job leaves with its outcome."""
    summary = scrub_summary(result.summary, endpoint, inputs)
    summary["calls"].update(calls or {})
    if corrected:
        summary["corrections"] = corrections_summary(corrected)
    summary.update(extra or {})
    usage = summary.get("tokens") or {}
    live.tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    live.cost = float(summary.get("cost_usd") or 0.0)
    live.total = summary["calls"]["planned"]
    live.done = live.total
    if summary.get("turns") and summary.get("scored_turns") == 0:
        outcome = Outcome(JobStatus.FAILED, 4, nothing_judged(summary), summary,
                          records=records)
    else:
        outcome = Outcome(JobStatus.SUCCEEDED, 1 if summary.get("error_turns") else 0, None,
                          summary, records=records)

    def wrap_up() -> None:
        outcome.rows = json.loads(inputs.clean(json.dumps(result.rows, ensure_ascii=False)))

    outcome.wrap_up = wrap_up
    return outcome


def imported_manifest(manifest: Any, config: Any, dialogues: Any, sources: dict[str, Any]
                      ) -> dict[str, Any]:
    """An imported run's manifest as a retry on this server resumes it: the bundle keeps what
    its answers depend on but not the exporter's endpoint, paths or options; the replies it
    carries count as answers of the endpoint the retry uses. The run still resumes only if
    everything else (inputs, model and options, templates) is what this run would be."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise InputError("the imported run's bundle has no manifest: there is nothing a retry "
                         "could continue from (submit an evaluate job instead)")
    return {**manifest, "config": {**manifest["config"], "endpoint": public_url(config.endpoint)},
            "sources": {"dialogues": "dialogues", "predictions": "predictions",
                        "dialogue_ids": [d.dialogue_id for d in dialogues.dialogues],
                        **{k: v for k, v in sources.items() if isinstance(v, str)}},
            "options": config.public_dict()}

