"""What each job kind does, on inputs unpacked from the database: the same library calls as
the CLI commands of the same name, with server paths kept out of the results.

Every runner has one face, :class:`Runner`: ``await runner.run(job, context)`` returns how the
job ended (:class:`Outcome`) or that it waits without a worker (:class:`Park`, a batch job);
the worker picks the runner from a table of job kinds (:mod:`._kinds`).

An evaluate job runs in its own run directory (``<data_dir>/runs/<job id>``) with the
library's resume support; its model requests go through the ledger in the service database
(:mod:`._ledger`), shared by every job and replica of the project, where each reply is
committed the moment it arrives. The directory is rebuilt from the database when a job moves to
another worker: the manifest and every logged call are kept in the ``jobs`` and ``job_calls``
tables as they happen, so a takeover re-sends only the calls that were in flight.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

from ..._config import load_config, public_url
from ..._errors import (
    BudgetReached,
    DatabaseUnavailable,
    DSTJudgeError,
    InputError,
    ModelError,
    ServiceError,
    StoreError,
)
from ...analysis import (
    agreement_report,
    audit_gold,
    audit_items,
    method_table,
    open_candidates,
    queue_records,
    render_audit,
    run_differences,
    source_from_predictions,
)
from ...data import (
    CorrectedGold,
    DialogueSet,
    Located,
    Schema,
    apply_each,
    load_dialogues,
    load_predictions,
    load_schema,
    read_corrections,
    scored_version,
)
from ...method import default_rules, load_rules, packaged_rules_path
from ...metrics import MetricOptions, compute_metrics, paper_tables
from ...model import AiohttpTransport, ReplyLimits, Transport
from ...pipeline import Run, RunDirectory, corrected_rows, evaluate_async
from ...store import LEDGER_FILE, SQLiteLedger
from ..db import Database, JobRow, ServiceSettings, files
from ..jobs import (
    JUDGE_OPTIONS,
    EstimateInputs,
    JobStatus,
    JobStore,
    endpoint_for,
    first_run,
    read_estimate_inputs,
    run_input_files,
)
from ..ledger import SHARED_SCOPE, DatabaseLedger, JobLimiter, replay_transport_for, worker_owner
from ..storage import FileStore
from ._lease import JobQueue, Records

log = logging.getLogger("dst_judge.service")
_SCRUBBED_OPTIONS = ("base_url", "cache_dir", "prices", "api_key_set", "organization",
                     "project", "http_backend")


@dataclass
class Outcome:
    """How a job ended, ready for :meth:`JobQueue.finish`."""

    status: JobStatus
    exit_code: int | None
    error: str | None = None
    summary: dict[str, Any] | None = None
    rows: list[dict[str, Any]] | None = None
    artifacts: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    records: Records | None = None
    """Run-log records the job leaves (manifests, calls), as the journal holds a live job's:
    written in the transaction of the outcome."""
    wrap_up: Callable[[], None] | None = None
    """File work left for the thread that writes the outcome (cleaning the rows, removing the
    run directory), so that it costs the event loop nothing and the job no extra thread hop."""


@dataclass
class Live:
    """Counters of a running job, written to the database by the heartbeat."""

    total: int | None = None
    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    cost: float = 0.0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    done_at_start: int | None = None

    def as_progress(self) -> dict[str, Any]:
        eta = None
        if self.total is not None and self.done_at_start is not None:
            fresh = self.done - self.done_at_start
            elapsed = time.monotonic() - self.started
            if fresh > 0 and elapsed > 0:
                eta = round((self.total - self.done) * elapsed / fresh, 1)
        return {"total": self.total, "done": self.done, "cache_hits": self.cache_hits,
                "errors": self.errors, "eta_seconds": eta}


@dataclass
class Park:
    """The visit is over: put the job aside until ``wake_at`` (a batch job)."""

    wake_at: float


class Journal(Protocol):
    """Where a running job's run log goes, written in the background (see the worker)."""

    def call(self, job_id: str, record: dict[str, Any]) -> None: ...

    def manifest(self, job_id: str, manifest: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Toolkit:
    """What the runners of one worker share."""

    db: Database
    settings: ServiceSettings
    store: FileStore
    jobs: JobStore
    """Reads: a source run, its run log and judgments, a token's spending."""
    queue: JobQueue
    """Writes of the run log outside the journal (a retry's seed, a batch job's plan)."""
    worker_id: str = "worker"


@dataclass
class RunContext:
    """What one run of one job gets from its worker."""

    worker_id: str
    live: Live
    """Its counters, which the worker's heartbeat stores as the job's progress."""
    limiter_for: Callable[[str], JobLimiter]
    """The job's share of an endpoint's rate-limit pool (stops granting on a drain)."""
    journal: Journal
    cancel_requested: Callable[[], bool]
    """Whether a cancel request was seen (a batch job acts on it between its steps)."""


class Runner(Protocol):
    """One kind of job (see :data:`._kinds.RUNNERS`)."""

    @property
    def progress(self) -> type[Live]:
        """The counters a run of this kind keeps (a class attribute of the runner)."""
        ...

    async def run(self, job: JobRow, context: RunContext) -> Outcome | Park: ...


class Inputs:
    """The job's files on local disk, and their upload names for messages and results."""

    def __init__(self, db: Database, store: FileStore, project_id: str) -> None:
        self.db = db
        self.store = store
        self.project_id = project_id
        self.names: dict[str, str] = {}
        self._rows: dict[str, dict[str, Any]] = {}

    def prefetch(self, file_ids: list[str | None]) -> None:
        """Look up several input files in one query (a job's schema, dialogues, predictions
        and rules) instead of one each."""
        wanted = [i for i in file_ids if i]
        with self.db.query() as conn:
            self._rows.update((row.id, dict(row._mapping)) for row in conn.execute(
                sa.select(files).where(files.c.id.in_(wanted),
                                       files.c.project_id == self.project_id)))

    def path(self, file_id: str) -> tuple[Path, dict[str, Any]]:
        row = self._rows.get(file_id)
        if row is None:
            with self.db.query() as conn:
                found = conn.execute(sa.select(files).where(
                    files.c.id == file_id, files.c.project_id == self.project_id)).first()
            if found is None:
                raise InputError(f"input file {file_id} was deleted")
            row = self._rows[file_id] = dict(found._mapping)
        path = self.store.local_path(row["sha256"])
        self.names[str(path)] = row["name"]
        return path, row

    def clean(self, text: str) -> str:
        """Upload names instead of server paths; then what is left of this machine's paths
        (the built-in rules, the data directory, the installation) named, not shown."""
        for path, name in self.names.items():
            text = text.replace(path, name)
        for path, name in server_paths(self.store.root.parent):
            text = text.replace(path, name)
        return text


@functools.lru_cache(maxsize=8)
def server_paths(data_dir: Path) -> tuple[tuple[str, str], ...]:
    """The paths of the server's machine a job's results and messages could name (a default
    rule set's source, a run directory, a file of the installation), longest first, each
    with what a client is shown instead: none of them is the client's business."""
    rules = packaged_rules_path()
    install = Path(__file__).resolve().parents[3]  # the folder holding the judge package
    found = {str(rules): f"built-in {rules.name}", str(rules.resolve()): f"built-in {rules.name}"}
    for path, name in ((data_dir, "<data dir>"), (install, "<dst-judge>")):
        found.setdefault(str(path), name)
        found.setdefault(str(path.resolve()), name)
    found.pop(str(Path(install.anchor)), None)  # never the root itself: it is in every path
    return tuple(sorted(found.items(), key=lambda item: -len(item[0])))


class ParsedFiles:
    """Schemas, dialogue sets and rule sets parsed once per worker process, by file path.

    Safe to share: stored files are content-addressed (a path names one content for good),
    and the library never changes a loaded schema, dialogue set or rule set (several systems
    of one run share them too). Every job of a benchmark or a team shares its schema and
    dialogues; parsing and validating them again cost each job tens of milliseconds."""

    def __init__(self, size: int = 8) -> None:
        self.schema = functools.lru_cache(size)(load_schema)
        self.dialogues = functools.lru_cache(max(1, size // 2))(load_dialogues)
        self.rules = functools.lru_cache(size)(load_rules)
        self.default_rules = functools.lru_cache(size)(
            lambda schema_path: default_rules(self.schema(schema_path)))


def _stem(name: str) -> str:
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name


def _subset(dialogues: DialogueSet, options: dict[str, Any]) -> DialogueSet:
    if options.get("dialogue_ids"):
        dialogues = dialogues.subset(options["dialogue_ids"], source="options.dialogue_ids")
    if options.get("limit") is not None:
        dialogues = dialogues.subset([d.dialogue_id for d in
                                      dialogues.dialogues[: options["limit"]]])
    return dialogues


def scrub_summary(summary: dict[str, Any], endpoint: str | None, inputs: Inputs
                  ) -> dict[str, Any]:
    """No server path, URL or key in a result: options keep the endpoint's name only."""
    text = inputs.clean(json.dumps(summary, ensure_ascii=False))
    clean: dict[str, Any] = json.loads(text)  # the summary's own text, scrubbed: an object
    options = clean.get("options")
    if isinstance(options, dict):
        for name in _SCRUBBED_OPTIONS:
            options.pop(name, None)
        if endpoint is not None:
            options["endpoint"] = endpoint
    return clean


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
        return self.settings.data_dir / "runs" / job_id

    def prepare_run_dir(self, job: JobRow, seed_calls: list[dict[str, Any]],
                        manifest: dict[str, Any] | None) -> bool:
        """Rebuild the run directory from what the database holds (and what a previous
        attempt on this machine left); returns whether there is something to resume."""
        folder = self.run_dir(job.id)
        folder.mkdir(parents=True, exist_ok=True)
        run = RunDirectory(folder)
        local = {e.get("custom_id"): e for e in run.read_log() if isinstance(e, dict)}
        known = {c["custom_id"]: c for c in seed_calls}
        missing_in_db = [e for key, e in local.items() if key and key not in known]
        if missing_in_db and manifest is not None:
            self.queue.record_calls(job.id, missing_in_db)
        merged = {**local, **known} if manifest is not None else {}
        if manifest is None:
            return False
        run.manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
        part = run.log_path.with_suffix(".part")
        part.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n"
                                for e in merged.values()), encoding="utf-8")
        part.replace(run.log_path)
        return True

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
        live, journal = context.live, context.journal
        start = await asyncio.to_thread(self._start, job, source, seed_job, options, inputs)
        folder = self.run_dir(job.id)
        stored_manifest = start.resume

        def on_result(result: Any) -> None:
            nonlocal stored_manifest
            if not stored_manifest:
                stored_manifest = True
                data = RunDirectory(folder).read_manifest()
                if data is not None:
                    journal.manifest(job.id, data)
            journal.call(job.id, dict(vars(result)))

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
        # the run log's last records reach the database with the job's outcome (the worker
        # takes them from the journal), or with the journal's next batch if the job is cancelled
        result = await evaluate_async(
            start.config, start.schema, start.dialogues, start.predictions,
            rules=start.rules, out_dir=folder, resume=start.resume, sources=start.sources,
            on_progress=on_progress, limiter=context.limiter_for(endpoint_name),
            on_result=on_result, refresh=job.kind == "retry-errors", ledger=start.ledger,
            transport=replay_transport_for(self.settings, endpoint_name)
            or self.transport(start.config))
        summary = scrub_summary(result.summary, endpoint_name, inputs)
        if start.corrected:
            summary["corrections"] = corrections_summary(start.corrected)
        usage = summary.get("tokens") or {}
        live.tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        live.cost = float(summary.get("cost_usd") or 0.0)
        live.total = summary["calls"]["planned"]
        live.done = live.total
        if summary.get("turns") and summary.get("scored_turns") == 0:
            outcome = Outcome(JobStatus.FAILED, 4, nothing_judged(summary), summary)
        else:
            outcome = Outcome(JobStatus.SUCCEEDED, 1 if summary.get("error_turns") else 0, None,
                              summary)

        def wrap_up() -> None:
            outcome.rows = json.loads(inputs.clean(json.dumps(result.rows, ensure_ascii=False)))
            shutil.rmtree(folder, ignore_errors=True)

        outcome.wrap_up = wrap_up
        return outcome

    def _start(self, job: JobRow, source: Any, seed_job: Any, options: dict[str, Any],
               inputs: Inputs) -> _Start:
        """Everything a job needs before its first call, in one thread hop: its inputs read
        and parsed, its configuration, its run directory rebuilt from the database, its
        ledger."""
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
        resume = self.prepare_run_dir(job, seed, manifest)
        return _Start(endpoint_name, config, schema, dialogues, predictions, rules, resume,
                      sources, self.ledger(job), corrected)

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
        dialogues = _subset(parsed.dialogues(dialogues_path), options)
        name = (pred_row.get("info") or {}).get("system_name") or _stem(pred_row["name"])
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
        correction_ids = _ids(job_inputs.get("corrections"))
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


def _ids(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def read_correction_files(inputs: Inputs, file_ids: list[str]) -> list[Located]:
    """Every correction of a job's ``inputs.corrections`` files (of the job's project; upload
    names stand for the server's paths in every message)."""
    found: list[Located] = []
    for file_id in file_ids:
        path, _ = inputs.path(file_id)
        found.extend(read_corrections([path]))
    return found


def corrections_summary(corrected: list[CorrectedGold]) -> list[dict[str, Any]]:
    """What a result says of the corrected gold it used (see :meth:`CorrectedGold.summary`)."""
    return [c.summary() for c in corrected]


class ThreadedRunner:
    """A job that makes no model calls: its CPU work (``_run``) in a thread, a library error
    its failure (exit 2, server paths taken out of the message)."""

    progress = Live

    def __init__(self, tools: Toolkit) -> None:
        self.db = tools.db
        self.store = tools.store
        self.jobs = tools.jobs

    async def run(self, job: JobRow, context: RunContext) -> Outcome:
        inputs = Inputs(self.db, self.store, job.project_id)
        try:
            return await asyncio.to_thread(self._run, job, inputs)
        except DatabaseUnavailable:
            raise
        except DSTJudgeError as exc:
            return Outcome(JobStatus.FAILED, 2, inputs.clean(str(exc)))

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        raise NotImplementedError


class AnalysisRunner(ThreadedRunner):
    """metrics, agreement, compare and audit jobs: CPU work in a thread, no model calls."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        if job.kind == "metrics":
            return self._metrics(job, inputs)
        if job.kind == "agreement":
            found = self._estimate_inputs(job, inputs)
            rows, corrected = self._corrected_rows(job, found.runs[0], inputs)
            report = agreement_report(rows, found.labels[0] if found.labels
                                      else None, sample=found.sample,
                                      predictions_sha256=found.digests[0],
                                      run_name=found.names[0], **job.options)
            if corrected:
                report = {**report, "corrections": corrections_summary(corrected)}
            return Outcome(JobStatus.SUCCEEDED, 0, summary=_json(report, inputs))
        if job.kind == "compare":
            found = self._estimate_inputs(job, inputs)
            labels = [human.per_turn() for human in found.labels]
            table = method_table(found.runs, labels[0] if len(labels) == 1 else None)
            if found.pairing:
                table["labels_pairing"] = found.pairing
            if found.sample is not None:
                table["sample_check"] = found.sample_check
                table["differences"] = run_differences(found.runs, labels, found.sample,
                                                       drawn_from=found.drawn_from,
                                                       resolutions=[h.resolve() for h in
                                                                    found.labels],
                                                       **job.options)
            return Outcome(JobStatus.SUCCEEDED, 0, summary=_json(table, inputs))
        if job.kind == "audit":
            return self._audit(job, inputs)
        raise ServiceError(f"unknown job kind {job.kind!r}", status=500)

    def _metrics(self, job: JobRow, inputs: Inputs) -> Outcome:
        options = dict(job.options)
        gold = options.pop("gold", None)
        subset: dict[str, Any] = {k: options.pop(k) for k in ("limit", "dialogue_ids")
                                  if k in options}
        schema = load_schema(inputs.path(job.inputs["schema"])[0])
        dialogues = _subset(load_dialogues(inputs.path(job.inputs["dialogues"])[0]), subset)
        systems = []
        for file_id in job.inputs["predictions"]:
            path, row = inputs.path(file_id)
            name = (row.get("info") or {}).get("system_name") or _stem(row["name"])
            systems.append(load_predictions(path, dialogues, schema, name=name))
        names = [s.name for s in systems]
        for system, file_id in zip(systems, job.inputs["predictions"], strict=True):
            if names.count(system.name) > 1:
                system.name = f"{system.name} ({file_id})"
        correction_ids = _ids(job.inputs.get("corrections"))
        corrected: list[CorrectedGold] = []
        if correction_ids:
            dialogues, corrected = apply_each(
                dialogues, read_correction_files(inputs, correction_ids), schema=schema)
            chosen = scored_version(dialogues, corrected, gold, option="options.gold")
            gold = chosen.name
        metric_options = MetricOptions(**options)
        report = compute_metrics(dialogues, systems, schema, metric_options, gold=gold)
        summary = report.to_dict()
        if corrected:
            tables = paper_tables(dialogues, systems, schema, versions=[chosen.base],
                                  options=metric_options, corrected=[(chosen.base, chosen.name)])
            summary["corrections"] = corrections_summary(corrected)
            summary["change"] = {"columns": tables.change_columns,
                                 "rows": [[_finite(v) for v in row]
                                          for row in tables.change_rows]}
        return Outcome(JobStatus.SUCCEEDED, 0, summary=_json(summary, inputs))

    def _corrected_rows(self, job: JobRow, run: Run, inputs: Inputs
                        ) -> tuple[list[dict[str, Any]], list[CorrectedGold]]:
        """The run's rows with the RULE verdicts of each corrected version added (computed from
        its judged turns with the run's own dialogues and schema: no model call)."""
        correction_ids = _ids(job.inputs.get("corrections"))
        if not correction_ids:
            return [dict(row) for row in run.rows], []
        with self.db.read() as conn:
            source = first_run(conn, job.project_id, str(job.inputs["run"]))
            if source is None:
                raise InputError(f"job {job.inputs['run']} is not a judge run of this project")
            files = run_input_files(conn, job.project_id, source)
        inputs.prefetch([files.get("schema"), files.get("dialogues"), *correction_ids])
        schema = load_schema(inputs.path(files["schema"])[0])
        dialogues = load_dialogues(inputs.path(files["dialogues"])[0], schema=schema)
        return corrected_rows(run.rows, dialogues, schema, run.summary.get("rule_match"),
                              read_correction_files(inputs, correction_ids))

    def _estimate_inputs(self, job: JobRow, inputs: Inputs) -> EstimateInputs:
        """The runs, labels and sample of an agreement or compare job, checked as at
        submission; their upload names stand for server paths in every message."""
        found = read_estimate_inputs(self.jobs, self.store, job.project_id, job.kind,
                                     job.inputs)
        inputs.names.update({path: name for path, (name, _) in found.paths.items()})
        return found

    def _run_of(self, project_id: str, job_id: str) -> Run:
        row = self.jobs.row(project_id, job_id)
        rows = list(self.jobs.judgments(project_id, job_id))
        if not rows or not row.summary:
            raise InputError(f"job {job_id} holds no judgments")
        return Run(Path(job_id), dict(row.summary), rows)

    def _audit(self, job: JobRow, inputs: Inputs) -> Outcome:
        if "run" not in job.inputs:
            return self._audit_predictions(job, inputs)
        run = self._run_of(job.project_id, job.inputs["run"])
        rows, corrected = self._corrected_rows(job, run, inputs)
        ignore_none = "nospace" in str(run.summary.get("rule_match") or "")
        items = audit_items(rows, ignore_none_pairs=ignore_none)
        page = render_audit(run.summary, rows, items).encode("utf-8")
        listed = [{"dialogue_id": i.dialogue_id, "turn_index": i.turn_index, "slot": i.slot,
                   "kind": i.kind, "predicted": i.predicted, "gold": i.gold,
                   "verdict": i.verdict, "rule": i.rule,
                   "disagreeing_versions": i.disagreeing_versions} for i in items]
        summary = {"run": job.inputs["run"], "items": len(items),
                   "turns": len({(i.dialogue_id, i.turn_index) for i in items}),
                   "artifact": "audit.html", "list": listed,
                   **({"corrections": corrections_summary(corrected)} if corrected else {})}
        return Outcome(JobStatus.SUCCEEDED, 0, summary=summary,
                       artifacts={"audit.html": ("text/html; charset=utf-8", page)})


    def _audit_predictions(self, job: JobRow, inputs: Inputs) -> Outcome:
        """An audit of predictions files, no judge: the label-error candidates still open
        (those the job's corrections decide left out), for the web's candidates queue
        (``candidates.jsonl``, in review order, each with its evidence-order place) and as
        the audit page's ranking."""
        ids = [job.inputs.get("schema"), job.inputs["dialogues"], *job.inputs["predictions"],
               *_ids(job.inputs.get("corrections"))]
        inputs.prefetch([i for i in ids if isinstance(i, str)])
        schema_id = job.inputs.get("schema")
        schema = load_schema(inputs.path(schema_id)[0]) if isinstance(schema_id, str) else None
        dialogues = load_dialogues(inputs.path(job.inputs["dialogues"])[0], schema=schema)
        sources = []
        for file_id in job.inputs["predictions"]:
            path, row = inputs.path(file_id)
            name = (row.get("info") or {}).get("system_name") or _stem(row["name"])
            sources.append(source_from_predictions(load_predictions(path, dialogues, schema,
                                                                    name=name)))
        names = [s.name for s in sources]
        for source, file_id in zip(sources, job.inputs["predictions"], strict=True):
            if names.count(source.name) > 1:
                source.name = f"{source.name} ({file_id})"
        located = read_correction_files(inputs, _ids(job.inputs.get("corrections")))
        audited, gold, decided = audit_gold(dialogues, located, schema=schema)
        found, dropped = open_candidates(audited, sources, gold=gold, schema=schema,
                                         decided=decided, order="evidence")
        records = queue_records(found, audited, gold, sources)
        listing = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        page = render_audit({}, [], [], sorted(found, key=lambda c: c.rank),
                            "review").encode("utf-8")
        summary = {"systems": [s.name for s in sources], "gold": gold,
                   "candidates": len(records), "decided": dropped,
                   "artifact": "audit.html", "queue": "candidates.jsonl"}
        if located:
            summary["corrections"] = len(located)
        return Outcome(JobStatus.SUCCEEDED, 0, summary=_json(summary, inputs), artifacts={
            "audit.html": ("text/html; charset=utf-8", page),
            "candidates.jsonl": ("application/x-ndjson", listing.encode("utf-8"))})


def _finite(value: Any) -> Any:
    """NaN (an interval of one dialogue) as null: results are strict JSON."""
    return None if isinstance(value, float) and value != value else value


def _json(data: Any, inputs: Inputs) -> Any:
    return json.loads(inputs.clean(json.dumps(data, ensure_ascii=False, default=str)))
