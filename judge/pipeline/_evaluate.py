"""Run the judge: evaluate live (resumable, within a budget), collect a finished batch, or send
again only the failed calls of a run. Each is plan → answer → result, writing the run
directory through :mod:`judge.pipeline._rundir`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._config import JudgeConfig, load_config
from .._errors import ModelError, OptionError
from ..data import DialogueSet, PredictionSet, Schema, load_dialogues, load_predictions, load_schema
from ..method import RuleSet, default_rules, load_rules
from ..model import Completion, ModelClient, SharedLimiter, Spend, call_key, load_prices
from ..store import ResponseCache
from ._answer import CallResult, LiveSource, RecordedSource, RunHooks, RunProgress, answer_plan
from ._batch import fan_out
from ._plan import plan_evaluation
from ._result import EvaluationResult, build_result
from ._rundir import RunDirectory, build_manifest


async def evaluate_async(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                         predictions: PredictionSet, *, rules: RuleSet | None = None,
                         http_client: Any = None, out_dir: str | Path | None = None,
                         resume: bool = False, sources: dict[str, Any] | None = None,
                         on_progress: Callable[[RunProgress], None] | None = None,
                         refresh: bool = False, limiter: SharedLimiter | None = None,
                         on_result: Callable[[CallResult], None] | None = None
                         ) -> EvaluationResult:
    """Judge every turn live (through the cache) and integrate the verdicts.

    With ``out_dir`` the run keeps an append-only log of finished calls and a manifest there,
    and writes ``judgments.jsonl`` and ``summary.json`` at the end; ``resume`` continues an
    interrupted run without sending any logged call again. Stops with :class:`BudgetReached`
    once ``config.budget`` USD are spent (resumable). ``refresh`` sends calls to the model even
    when the cache has them (and stores the new replies). ``limiter`` is a rate-limit pool
    shared with other runs (the service's); ``on_result`` hears of every call as it is logged
    (the service keeps a copy of the run log in its database).
    """
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    prices = load_prices(config.prices)
    hooks = RunHooks(spend=Spend(prices.price(config.model)), budget=config.budget)
    run_dir = RunDirectory(out_dir) if out_dir is not None else None
    if run_dir is not None:
        logged = run_dir.start(build_manifest(plan, sources), resume=resume)
        hooks.done = {e["custom_id"]: CallResult(**e) for e in logged}
        for earlier in hooks.done.values():
            hooks.finished_before(earlier)

    progress = RunProgress(total=len(plan.calls), spend=hooks.spend)
    progress.done = len(hooks.done)

    def finished(result: CallResult) -> None:
        if run_dir is not None:
            run_dir.append(result)
        if on_result is not None:
            on_result(result)
        progress.update(result)
        if on_progress is not None:
            on_progress(progress)

    hooks.on_result = finished
    cache = ResponseCache(config.cache_dir) if config.use_cache else None
    client = ModelClient(config, http_client=http_client, cache=cache, read_cache=not refresh,
                         before_send=hooks.check_budget, limiter=limiter)
    try:
        answers = await answer_plan(plan, LiveSource(client), hooks)
    finally:
        await client.aclose()
        if cache is not None:
            cache.close()
        if run_dir is not None:
            run_dir.close()
    result = build_result(plan, answers)
    calls = result.summary["calls"]
    calls.update(sent=client.calls, retries=client.retries, cache_hits=client.cache_hits,
                 resumed=len(hooks.done))
    result.summary["budget_usd"] = config.budget
    if out_dir is not None:
        result.write(out_dir)
    return result


def evaluate(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
             predictions: PredictionSet, **options: Any) -> EvaluationResult:
    """Synchronous :func:`evaluate_async` (same keyword options)."""
    return asyncio.run(evaluate_async(config, schema, dialogues, predictions, **options))


def collect(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
            predictions: PredictionSet,
            records: dict[tuple[str, int, str], Completion | ModelError], *,
            rules: RuleSet | None = None) -> EvaluationResult:
    """Integrate a finished batch's completions exactly as live ones (no re-asks); a call
    whose request body was sent once for several calls gets that line's answer."""
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    answered = fan_out(plan, records)
    result = build_result(plan, asyncio.run(answer_plan(plan, RecordedSource(answered))),
                          batch=True)
    expected = {call_key(c.dialogue_id, c.turn_index, c.dimension) for c in plan.calls}
    result.summary["calls"]["batch_lines_unused"] = len(set(records) - expected)
    result.summary["calls"]["batch_lines_missing"] = len(expected - set(answered))
    result.summary["calls"]["batch_lines_shared"] = len(set(answered) - set(records))
    return result


def rules_for(path: str | Path | None, schema: Schema) -> RuleSet:
    """The rule file given, else the packaged rules that fit the schema."""
    return load_rules(path) if path else default_rules(schema)


TRANSPORT_OPTIONS = ("base_url", "concurrency", "timeout", "max_retries", "rpm", "tpm", "budget",
                     "cache_dir")
"""Options ``retry-errors`` may change: they decide how calls travel, not what they answer."""


def retry_errors(run_dir: str | Path, *, overrides: dict[str, Any] | None = None,
                 http_client: Any = None,
                 on_progress: Callable[[RunProgress], None] | None = None) -> EvaluationResult:
    """Send again only the calls of a run that ended in an error; every other call comes from
    the run log. Data and options come from the run's manifest; only transport options
    (:data:`TRANSPORT_OPTIONS`) may be overridden."""
    folder = RunDirectory(run_dir)
    manifest = folder.read_manifest()
    if manifest is None:
        raise OptionError(f"{run_dir} is not a run directory with a manifest")
    unknown = sorted(set(overrides or {}) - set(TRANSPORT_OPTIONS))
    if unknown:
        raise OptionError(f"retry-errors cannot change {', '.join(unknown)}: it would change "
                          "the answers; start a new run instead")
    fields = set(JudgeConfig.model_fields)
    values = {k: v for k, v in manifest["options"].items() if k in fields and k != "api_key"}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    config = load_config(values)
    sources = manifest["sources"]
    schema = load_schema(sources["schema"])
    dialogues = load_dialogues(sources["dialogues"]).subset(sources["dialogue_ids"])
    predictions = load_predictions(sources["predictions"], dialogues, schema)
    rules = rules_for(sources.get("rules"), schema)
    removed = folder.drop_errors()
    kept = {k: sources.get(k) for k in ("schema", "schema_sha256", "rules") if k in sources}
    result = evaluate(config, schema, dialogues, predictions, rules=rules, out_dir=run_dir,
                      resume=True, http_client=http_client, sources=kept,
                      on_progress=on_progress, refresh=True)
    result.summary["calls"]["retried"] = removed
    result.write(run_dir)
    return result
