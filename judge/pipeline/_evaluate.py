"""Run the judge live: evaluate (resumable, within a budget) or send again only the failed
calls of a run. Each is plan → answer → result, kept in a :class:`RunStore` (a run directory
by default). Collecting a finished batch is :mod:`judge.pipeline._collect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._config import JudgeConfig, load_config
from .._errors import OptionError, RunConflict, RunInterrupted
from .._names import TRANSPORT_OPTIONS as TRANSPORT_OPTIONS
from ..data import DialogueSet, PredictionSet, Schema, load_dialogues, load_predictions, load_schema
from ..method import RuleSet, default_rules, load_rules
from ..model import (
    ModelClient,
    SharedLimiter,
    Spend,
    Transport,
    load_prices,
)
from ..store import LEDGER_FILE, Ledger, SQLiteLedger, open_cache
from ._answer import (
    CallResult,
    LiveSource,
    RunControl,
    RunHooks,
    RunProgress,
    answer_plans,
)
from ._plan import EvaluationPlan, plan_evaluation
from ._result import EvaluationResult, build_result
from ._rundir import RunDirectory, build_manifest
from ._store import RunStore


def open_ledger(config: JudgeConfig, directory: str | Path | None) -> Ledger:
    """The ledger a run records its paid requests in.

    With the cache on it is the cache directory's, shared with every run using that directory
    (it *is* the reply cache). With the cache off it is the run's own, ``ledger.sqlite3`` in
    ``directory`` (the run directory): the run reuses nothing another run paid for, but never
    pays twice for its own requests, across kills and ``--resume`` too. Without either, an
    in-memory one.
    """
    if config.use_cache:
        return open_cache(config.cache_dir)
    if directory is not None:
        return SQLiteLedger(Path(directory) / LEDGER_FILE)
    return SQLiteLedger(":memory:")


@contextlib.contextmanager
def _signals_stop(control: RunControl, enabled: bool) -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the run gracefully: the first stops new sends and lets calls in
    flight finish within the grace period; a second one cancels them at once."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []

    def on_signal(number: int) -> None:
        name = signal.Signals(number).name
        if control.stop_reason is None:
            control.stop(RunInterrupted(
                f"stopped by {name}; every finished call and every reply that arrived is "
                "recorded: pass --resume to continue", signal_number=number))
            print(f"dst-judge: {name}: sending nothing more; waiting up to {control.grace:g} s "
                  "for calls in flight (again to stop at once)", file=sys.stderr, flush=True)
        else:
            control.abort.set()

    if enabled:
        for number in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(number, on_signal, number)
                installed.append(number)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                break
    try:
        yield
    finally:
        for number in installed:
            loop.remove_signal_handler(number)


@dataclass(frozen=True)
class RunEnvironment:
    """What a run is given by whoever runs it, as opposed to what it judges: where paid replies
    are kept, the connections and rate limits it shares, and who hears of its progress. The
    CLI gives none of it (a run then opens its own ledger and connections); the service gives
    all of it, shared by its jobs."""

    ledger: Ledger | None = None
    """The ledger of paid requests (default: :func:`open_ledger`)."""
    limiter: SharedLimiter | None = None
    """A rate-limit pool shared with other runs (the service's)."""
    transport: Transport | None = None
    """A connection pool shared with other runs and left open (the service's, per endpoint)."""
    http_client: Any = None
    """An HTTP client to send the requests with (tests pass a fake one)."""
    on_progress: Callable[[RunProgress], None] | None = None
    """Hears the run's progress after every finished call."""
    on_result: Callable[[CallResult], None] | None = None
    """Hears of every call as it is logged."""
    handle_signals: bool = False
    """Ctrl-C and SIGTERM stop the run gracefully with :class:`RunInterrupted`."""


def _environment(environment: RunEnvironment | None, **given: Any) -> RunEnvironment:
    """``environment`` with the parts given one by one (the older keyword arguments) put in."""
    return replace(environment or RunEnvironment(),
                   **{name: value for name, value in given.items()
                      if value is not None and value is not False})


@dataclass
class _System:
    """One system's part of an invocation: its plan, run store and logged calls."""

    plan: EvaluationPlan
    run_dir: RunStore | None = None
    logged: list[dict[str, Any]] = field(default_factory=list)


async def evaluate_async(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                         predictions: PredictionSet, *, rules: RuleSet | None = None,
                         out_dir: str | Path | None = None, store: RunStore | None = None,
                         resume: bool = False, sources: dict[str, Any] | None = None,
                         refresh: bool = False, force: bool = False,
                         retry_failed: bool = False,
                         environment: RunEnvironment | None = None,
                         http_client: Any = None,
                         on_progress: Callable[[RunProgress], None] | None = None,
                         ledger: Ledger | None = None, handle_signals: bool = False,
                         limiter: SharedLimiter | None = None,
                         on_result: Callable[[CallResult], None] | None = None,
                         transport: Transport | None = None) -> EvaluationResult:
    """Judge every turn live (through the ledger) and integrate the verdicts.

    With ``out_dir`` the run locks that directory, keeps an append-only log of finished calls
    and a manifest there, and writes ``judgments.jsonl`` and ``summary.json`` at the end;
    ``store`` keeps them elsewhere instead (any :class:`RunStore`, e.g. the service's
    database). ``resume`` continues an interrupted run without sending any logged call again,
    and any request already paid for comes from the ledger (see :func:`open_ledger`). A store
    holding another run is refused unless ``force``. Stops with :class:`BudgetReached` once
    ``config.budget`` USD are spent (resumable). ``refresh`` sends calls to the model even
    when the ledger has them (and stores the new replies); ``retry_failed`` first drops the
    logged calls that ended in an error (with ``refresh``: ``retry-errors``).

    ``environment`` is what the caller lends the run (:class:`RunEnvironment`: ledger, rate
    limits, connections, callbacks); its parts may also be given one by one as the keyword
    arguments of the same names, which take precedence.
    """
    if out_dir is not None and store is not None:
        raise OptionError("a run is kept in one place: give out_dir or store, not both")
    env = _environment(environment, http_client=http_client, on_progress=on_progress,
                       ledger=ledger, handle_signals=handle_signals, limiter=limiter,
                       on_result=on_result, transport=transport)
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    if store is None and out_dir is not None:
        store = RunDirectory(out_dir)
    ledger_dir = store.path if isinstance(store, RunDirectory) else None
    return (await _judge_systems([_System(plan, store)], config, env, sources=sources,
                                 resume=resume, force=force, retry_failed=retry_failed,
                                 ledger_dir=ledger_dir, refresh=refresh))[0]


async def evaluate_systems_async(
        config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
        predictions: Sequence[PredictionSet], *, rules: RuleSet | None = None,
        http_client: Any = None, out_dir: str | Path | None = None, resume: bool = False,
        sources: dict[str, Any] | None = None,
        on_progress: Callable[[RunProgress], None] | None = None, force: bool = False,
        ledger: Ledger | None = None, handle_signals: bool = False,
        environment: RunEnvironment | None = None) -> list[EvaluationResult]:
    """Judge several systems on the same dialogues in one go: every distinct request is sent
    once (systems agree on many turns), and each system's results are those a separate run
    would give.

    With ``out_dir`` each system gets its own run directory ``out_dir/<system>`` (see
    :func:`system_dirs`), and with the cache off the systems share one ledger,
    ``out_dir/ledger.sqlite3``. A request two systems share is billed to the first that
    asks; the other's summary counts it as shared. ``environment``: as for
    :func:`evaluate_async`.
    """
    env = _environment(environment, http_client=http_client, on_progress=on_progress,
                       ledger=ledger, handle_signals=handle_signals)
    names = system_dirs(predictions)
    systems = []
    if out_dir is not None:
        parent = RunDirectory(out_dir)
        if parent.read_manifest() is not None:
            raise RunConflict(f"{out_dir} holds a single run; several systems need a directory "
                              "of their own (one run directory per system inside it)")
    for name, system in zip(names, predictions, strict=True):
        plan = plan_evaluation(config, schema, dialogues, system, rules=rules)
        folder = RunDirectory(Path(out_dir) / name) if out_dir is not None else None
        systems.append(_System(plan, folder))
    return await _judge_systems(systems, config, env, sources=sources, resume=resume,
                                force=force, retry_failed=False, ledger_dir=out_dir,
                                refresh=False)


def system_dirs(predictions: Sequence[PredictionSet]) -> list[str]:
    """A distinct, file-system-safe directory name per system (its name, else its file)."""
    names: list[str] = []
    for system in predictions:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", system.name or "").strip("._") or "system"
        if base in names:
            stem = Path(system.path).name.removesuffix(".gz").removesuffix(".jsonl")
            base = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{base}-{stem}").strip("._")
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


async def _judge_systems(systems: list[_System], config: JudgeConfig, env: RunEnvironment, *,
                         sources: dict[str, Any] | None, resume: bool, force: bool,
                         retry_failed: bool, ledger_dir: str | Path | None,
                         refresh: bool) -> list[EvaluationResult]:
    """Open every system's run store, answer all plans through one client and ledger, write
    each system's results."""
    try:
        for system in systems:
            if system.run_dir is not None:
                system.logged = system.run_dir.start(
                    build_manifest(system.plan, sources), resume=resume or retry_failed,
                    force=force, retry_failed=retry_failed)
        results = await _run(systems, config, env, refresh=refresh, ledger_dir=ledger_dir)
        for system, result in zip(systems, results, strict=True):
            if system.run_dir is not None:
                result.summary["calls"]["retried"] = system.run_dir.dropped
                system.run_dir.write_results(result.rows, result.summary)
        return results
    finally:
        for system in systems:
            if system.run_dir is not None:
                system.run_dir.close()


async def _run(systems: list[_System], config: JudgeConfig, env: RunEnvironment, *,
               refresh: bool, ledger_dir: str | Path | None) -> list[EvaluationResult]:
    prices = load_prices(config.prices)
    control = RunControl(spend=Spend(prices.price(config.model)), budget=config.budget,
                         grace=config.stop_grace)
    progress = RunProgress(total=sum(len(s.plan.calls) for s in systems), spend=control.spend)
    jobs = []
    for system in systems:
        hooks = RunHooks(done={e["custom_id"]: CallResult.from_log(e) for e in system.logged},
                         on_result=_logger(system.run_dir, progress, env),
                         control=control)
        for earlier in hooks.done.values():
            hooks.finished_before(earlier)
        progress.done += len(hooks.done)
        jobs.append((system.plan, hooks))
    own_ledger = env.ledger is None
    ledger = env.ledger if env.ledger is not None else open_ledger(config, ledger_dir)
    first_dir = systems[0].run_dir
    run_id = (first_dir.run_id if first_dir is not None else None) or uuid.uuid4().hex
    client = ModelClient(config, http_client=env.http_client, ledger=ledger, refresh=refresh,
                         run_id=run_id, before_send=control.before_send, limiter=env.limiter,
                         transport=env.transport)
    try:
        with _signals_stop(control, env.handle_signals):
            answers = await answer_plans(jobs, LiveSource(client), control)
    finally:
        await client.aclose()
        if own_ledger:
            ledger.close()
    results = []
    for (plan, hooks), answered in zip(jobs, answers, strict=True):
        result = build_result(plan, answered)
        calls = result.summary["calls"]
        calls.update(sent=client.calls, retries=client.retries, cache_hits=client.cache_hits,
                     recovered=client.recovered, shared=client.shared,
                     resumed=len(hooks.done))
        if len(systems) > 1:
            # the client's counts are the group's; per system: what it paid for, and what it
            # got without paying (the ledger, or a request another system sent)
            attempts = [a for r in answered for a in r.attempts]
            paid = sum(1 for a in attempts if not a.get("cached"))
            calls.update(group={k: calls[k] for k in ("sent", "retries", "cache_hits",
                                                      "recovered", "shared")},
                         sent=paid, cache_hits=len(attempts) - paid)
        result.summary["budget_usd"] = config.budget
        results.append(result)
    return results


def _logger(run_dir: RunStore | None, progress: RunProgress,
            env: RunEnvironment) -> Callable[[CallResult], None]:
    def finished(result: CallResult) -> None:
        if run_dir is not None:
            run_dir.append(result)
        if env.on_result is not None:
            env.on_result(result)
        progress.update(result)
        if env.on_progress is not None:
            env.on_progress(progress)

    return finished


def evaluate(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
             predictions: PredictionSet, **options: Any) -> EvaluationResult:
    """Synchronous :func:`evaluate_async` (same keyword options)."""
    return asyncio.run(evaluate_async(config, schema, dialogues, predictions, **options))


def evaluate_systems(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                     predictions: Sequence[PredictionSet],
                     **options: Any) -> list[EvaluationResult]:
    """Synchronous :func:`evaluate_systems_async` (same keyword options)."""
    return asyncio.run(evaluate_systems_async(config, schema, dialogues, predictions,
                                              **options))


def rules_for(path: str | Path | None, schema: Schema) -> RuleSet:
    """The rule file given, else the packaged rules that fit the schema."""
    return load_rules(path) if path else default_rules(schema)




def retry_errors(run_dir: str | Path, *, overrides: dict[str, Any] | None = None,
                 http_client: Any = None,
                 on_progress: Callable[[RunProgress], None] | None = None,
                 handle_signals: bool = False) -> EvaluationResult:
    """Send again only the calls of a run that ended in an error; every other call comes from
    the run log. Data and options come from the run's manifest; only transport options
    (:data:`TRANSPORT_OPTIONS`) may be overridden."""
    folder = RunDirectory(run_dir)
    manifest = folder.read_manifest()
    if manifest is None:
        raise OptionError(f"{run_dir} is not a run directory with a manifest")
    if manifest.get("kind", "evaluate") != "evaluate":
        raise OptionError(f"{run_dir} holds a {manifest.get('kind')} run: retry-errors "
                          "re-sends live calls of an evaluate run")
    unknown = sorted(set(overrides or {}) - set(TRANSPORT_OPTIONS))
    if unknown:
        raise OptionError(f"retry-errors cannot change {', '.join(unknown)}: it would change "
                          "the answers; start a new run instead")
    fields = set(JudgeConfig.model_fields)
    options = manifest.get("options")
    sources = manifest.get("sources")
    if not isinstance(options, dict) or not isinstance(sources, dict):
        raise OptionError(f"{folder.manifest_path} lacks its options or sources")
    missing = [k for k in ("schema", "dialogues", "predictions", "dialogue_ids")
               if k not in sources]
    if missing:
        raise OptionError(f"{folder.manifest_path}: sources lack {', '.join(missing)}; "
                          "this run cannot be retried (start a new one)")
    values = {k: v for k, v in options.items() if k in fields and k != "api_key"}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    config = load_config(values)
    schema = load_schema(sources["schema"])
    dialogues = load_dialogues(sources["dialogues"]).subset(sources["dialogue_ids"])
    predictions = load_predictions(sources["predictions"], dialogues, schema)
    rules = rules_for(sources.get("rules"), schema)
    kept = {k: sources.get(k) for k in ("schema", "schema_sha256", "rules") if k in sources}
    return evaluate(config, schema, dialogues, predictions, rules=rules, out_dir=run_dir,
                    retry_failed=True, http_client=http_client, sources=kept,
                    on_progress=on_progress, refresh=True, handle_signals=handle_signals)
