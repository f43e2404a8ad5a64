"""The judge pipeline: plan calls → answer them (live or from a batch file) → parse with bounded
re-asks → rule filters and integration → per-turn judgments and a summary.

Live calls and collected Batch API output go through exactly the same parsing, filters and
integration; only the source of completions differs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .._config import JudgeConfig
from .._digest import file_digest, text_digest
from .._errors import BudgetReached, ModelError
from ..data import (
    Dialogue,
    DialogueSet,
    PredDialogue,
    PredictionSet,
    Schema,
    State,
    judged_turn_states,
    turn_states,
)
from ..method import (
    Dimension,
    InvalidOutput,
    PromptSet,
    RenderedPrompt,
    RuleSet,
    TurnInput,
    TurnVerdict,
    agreement,
    build_body,
    default_rules,
    integrate_dialogue,
    parse_reply,
    totals,
)
from ..metrics import ratio, rule_policy, rule_verdicts
from ..model import (
    Completion,
    ModelClient,
    SharedLimiter,
    Spend,
    call_key,
    custom_id,
    load_prices,
    usage_cost,
)
from ._rundir import MANIFEST_FORMAT, RunDirectory

_REASK = ("Your reply could not be used: {error}. Answer again with only the JSON object in the "
          "format described above, and nothing else.")


@dataclass
class PlannedCall:
    """One judge call for one turn and dimension (or a skipped one: nothing to judge)."""

    dialogue_id: str
    turn_index: int
    dimension: Dimension
    prompt: RenderedPrompt
    body: dict[str, Any]
    skipped: bool = False

    @property
    def custom_id(self) -> str:
        return custom_id(self.dialogue_id, self.turn_index, self.dimension)


@dataclass
class PlannedTurn:
    dialogue: Dialogue
    turn_index: int
    judged_state: State
    calls: list[PlannedCall]


@dataclass
class EvaluationPlan:
    """Everything decided before any model call."""

    config: JudgeConfig
    schema: Schema
    rules: RuleSet
    prompts: PromptSet
    dialogues: DialogueSet
    predictions: PredictionSet
    turns: list[PlannedTurn]

    @property
    def calls(self) -> list[PlannedCall]:
        return [c for t in self.turns for c in t.calls if not c.skipped]


def _history(dialogue: Dialogue, turn_index: int) -> list[tuple[str, str]]:
    history: list[tuple[str, str]] = []
    for turn in dialogue.turns[:turn_index]:
        if turn.system:
            history.append(("agent", turn.system))
        history.append(("user", turn.user))
    return history


def plan_evaluation(config: JudgeConfig, schema: Schema, dialogues: DialogueSet,
                    predictions: PredictionSet, *, rules: RuleSet | None = None,
                    prompts: PromptSet | None = None) -> EvaluationPlan:
    """Render every call of a run (nothing is sent)."""
    prompts = prompts or PromptSet(schema, config.method, config.prompt_variant)
    rules = rules or default_rules(schema)
    turns: list[PlannedTurn] = []
    for dialogue in dialogues.dialogues:
        pred: PredDialogue = predictions.for_dialogue(dialogue)
        judged = judged_turn_states([t.pred_state or {} for t in pred.turns],
                                    [t.pred_turn_state for t in pred.turns])
        for index, turn in enumerate(dialogue.turns):
            history = _history(dialogue, index)
            calls = []
            for dimension in prompts.dimensions:
                rendered = prompts.render(dimension, history, turn.system, turn.user,
                                          judged[index])
                calls.append(PlannedCall(
                    dialogue.dialogue_id, index, dimension, rendered,
                    build_body(config, rendered.messages, dimension,
                               dialogue_id=dialogue.dialogue_id),
                    skipped=dimension == "accuracy" and not judged[index]))
            turns.append(PlannedTurn(dialogue, index, judged[index], calls))
    return EvaluationPlan(config, schema, rules, prompts, dialogues, predictions, turns)


class CompletionSource(Protocol):
    """Where completions come from: a live model or a finished batch."""

    can_reask: bool
    batch: bool
    """Replies came through the Batch API (priced with its discount)."""

    async def answer(self, call: PlannedCall, body: dict[str, Any]) -> Completion: ...


class LiveSource:
    """Completions from the model (through the cache)."""

    can_reask = True
    batch = False

    def __init__(self, client: ModelClient) -> None:
        self.client = client

    async def answer(self, call: PlannedCall, body: dict[str, Any]) -> Completion:
        return await self.client.complete(body, template_hash=call.prompt.template_hash)


class RecordedSource:
    """Completions read from a Batch API output file; a missing line is an error row."""

    can_reask = False
    batch = True

    def __init__(self, records: dict[tuple[str, int, str], Completion | ModelError]) -> None:
        self.records = records

    async def answer(self, call: PlannedCall, body: dict[str, Any]) -> Completion:
        found = self.records.get(call_key(call.dialogue_id, call.turn_index, call.dimension))
        if found is None:
            raise ModelError(f"no line for {call.custom_id} in the batch output")
        if isinstance(found, ModelError):
            raise found
        return found


@dataclass
class CallResult:
    """One call's whole story: attempts (raw replies), the parsed result or the error."""

    dimension: str
    custom_id: str
    template_hash: str
    prompt_hash: str
    skipped: bool = False
    attempts: list[dict[str, Any]] = field(default_factory=list)
    explanation: str | None = None
    results: dict[str, dict[str, Any]] | None = None
    error: str | None = None

    @property
    def from_cache(self) -> bool:
        """Answered by the response cache (its first attempt was never sent)."""
        return bool(self.attempts and self.attempts[0].get("cached"))

    def billed_usage(self) -> Iterator[dict[str, int]]:
        """Token usage of the attempts that were really sent (cache answers cost nothing)."""
        for attempt in self.attempts:
            if not attempt.get("cached"):
                yield attempt.get("usage") or {}


@dataclass
class RunHooks:
    """Per-run behaviour around calls: results already known (resume), a callback for each
    finished call (run log, progress), and the spending limit."""

    done: dict[str, CallResult] = field(default_factory=dict)
    on_result: Callable[[CallResult], None] | None = None
    spend: Spend | None = None
    budget: float | None = None

    def check_budget(self) -> None:
        if self.budget is not None and self.spend is not None and self.spend.usd >= self.budget:
            raise BudgetReached(f"budget reached: {self.spend.usd:.4f} USD spent of "
                                f"{self.budget:.4f}")

    def finished_before(self, result: CallResult) -> None:
        """Account a call finished by an earlier attempt of this run (resume)."""
        if self.spend is not None:
            for usage in result.billed_usage():
                self.spend.add(usage)

    def finished(self, result: CallResult) -> None:
        self.finished_before(result)
        if self.on_result is not None:
            self.on_result(result)


async def judge_call(call: PlannedCall, source: CompletionSource, reasks: int,
                     hooks: RunHooks | None = None) -> CallResult:
    """Answer one call (or take it from a previous attempt of the run), re-asking while the
    reply is invalid and the source can."""
    hooks = hooks or RunHooks()
    known = hooks.done.get(call.custom_id)
    if known is not None:
        return known
    result = await _answer(call, source, reasks, hooks)
    if not call.skipped:
        hooks.finished(result)
    return result


async def _answer(call: PlannedCall, source: CompletionSource, reasks: int,
                  hooks: RunHooks) -> CallResult:
    result = CallResult(call.dimension, call.custom_id, call.prompt.template_hash,
                        call.prompt.prompt_hash, skipped=call.skipped)
    if call.skipped:
        result.results = {"incorrect_domain_slot": {}}
        return result
    body = call.body
    for attempt in range(reasks + 1):
        try:
            completion = await source.answer(call, body)
        except ModelError as exc:
            if exc.fatal:
                raise
            result.error = f"model error: {exc}"
            return result
        result.attempts.append({**completion.record(), "cached": completion.cached})
        if completion.refusal:
            result.error = f"refused: {completion.refusal}"
            return result
        if completion.finish_reason == "length":
            result.error = "truncated: the reply hit max_tokens (finish_reason 'length')"
            return result
        try:
            judgment = parse_reply(completion.text, call.dimension)
        except InvalidOutput as exc:
            result.error = f"invalid output after {attempt + 1} attempt(s): {exc}"
            if not source.can_reask or attempt == reasks:
                return result
            body = {**body, "messages": [
                *body["messages"], {"role": "assistant", "content": completion.text or ""},
                {"role": "user", "content": _REASK.format(error=exc)}]}
            continue
        result.error = None
        result.explanation = judgment.explanation
        result.results = judgment.results
        return result
    return result  # pragma: no cover - the loop always returns


@dataclass(repr=False)
class EvaluationResult:
    """Per-turn judgments and the summary of a run."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]

    def __repr__(self) -> str:  # cheap: asyncio.run builds it (python/cpython#112559)
        return f"EvaluationResult(turns={len(self.rows)}, tsa={self.summary.get('tsa')})"

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        judgments = out / "judgments.jsonl"
        with judgments.open("w", encoding="utf-8") as handle:
            for row in self.rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        summary = out / "summary.json"
        summary.write_text(json.dumps(self.summary, indent=2, ensure_ascii=False) + "\n",
                           encoding="utf-8")
        return judgments, summary


def _turn_input(turn: PlannedTurn, results: Sequence[CallResult]) -> TurnInput:
    errors = [f"{r.dimension}: {r.error}" for r in results if r.error]
    merged: dict[str, dict[str, Any]] = {}
    for r in results:
        merged.update(r.results or {})
    return TurnInput(turn.turn_index, turn.judged_state,
                     merged.get("incorrect_domain_slot"), merged.get("missed_domain_slot"),
                     "; ".join(errors) or None)


def _usage(results: Sequence[CallResult]) -> dict[str, int]:
    totals_ = {"prompt_tokens": 0, "completion_tokens": 0, "cached_prompt_tokens": 0}
    for r in results:
        for usage in r.billed_usage():
            for key in totals_:
                totals_[key] += int(usage.get(key, 0))
    return totals_


async def run_plan(plan: EvaluationPlan, source: CompletionSource,
                   hooks: RunHooks | None = None) -> EvaluationResult:
    """Answer every call of the plan and integrate the results."""
    config = plan.config
    tasks = [asyncio.ensure_future(judge_call(c, source, config.reasks, hooks))
             for t in plan.turns for c in t.calls]
    try:
        answers = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    remaining = iter(answers)
    per_turn = [[next(remaining) for _ in turn.calls] for turn in plan.turns]
    return _integrate(plan, per_turn, answers, batch=source.batch)


def _integrate(plan: EvaluationPlan, per_turn: list[list[CallResult]],
               answers: Sequence[CallResult], *, batch: bool = False) -> EvaluationResult:
    config = plan.config
    policy, ignore_none = rule_policy(config.effective_rule_match, plan.schema)
    versions = plan.dialogues.versions
    rows: list[dict[str, Any]] = []
    verdicts: list[TurnVerdict] = []
    rule_by_version: dict[str, list[bool]] = {v: [] for v in versions}
    position = 0
    for dialogue in plan.dialogues.dialogues:
        count = len(dialogue.turns)
        turns = plan.turns[position:position + count]
        results = per_turn[position:position + count]
        inputs = [_turn_input(turn, res) for turn, res in zip(turns, results, strict=True)]
        dialogue_verdicts = integrate_dialogue(inputs, plan.schema, plan.rules, config.semantics)
        rules_here, gold_turns = {}, {}
        judged = [t.judged_state for t in turns]
        for version in versions:
            gold = [t.gold_states[version] for t in dialogue.turns]
            gold_turns[version] = turn_states(gold)
            rules_here[version] = rule_verdicts(gold, judged, policy, ignore_none_pairs=ignore_none)
            rule_by_version[version].extend(rules_here[version])
        for i, (turn, res, verdict) in enumerate(
                zip(turns, results, dialogue_verdicts, strict=True)):
            source_turn = dialogue.turns[turn.turn_index]
            rows.append({
                "dialogue_id": dialogue.dialogue_id, "turn_index": turn.turn_index,
                "system": source_turn.system, "user": source_turn.user,
                "pred_turn_state": turn.judged_state,
                "verdict": verdict.verdict, "jga": verdict.jga,
                "error": inputs[i].error,
                "incorrect": verdict.incorrect, "missed": verdict.missed,
                "rule": {v: rules_here[v][i] for v in versions},
                "gold_turn_state": {v: gold_turns[v][turn.turn_index] for v in versions},
                "calls": [dict(vars(r)) for r in res],  # shallow: results are not mutated
                "trace": verdict.trace,
                "state": {"incorrect": verdict.state_incorrect, "missed": verdict.state_missed,
                          "correct": verdict.state_correct},
            })
        verdicts.extend(dialogue_verdicts)
        position += count
    run = totals(verdicts)
    judge_verdicts = [v.verdict for v in verdicts]
    made = [r for r in answers if not r.skipped]
    tokens = _usage(made)
    prices = load_prices(config.prices)
    static = sum(c.prompt.static_chars for c in plan.calls)
    total = sum(c.prompt.total_chars for c in plan.calls)
    errors = [row for row in rows if row["error"]]
    summary = {
        "method": config.method, "semantics": config.semantics,
        "turns": run.turns, "scored_turns": run.scored, "error_turns": run.errors,
        "tsa": run.tsa, "judge_jga": run.judge_jga, "judge_jga_turns": run.jga_turns,
        "rule": {v: {"tsa": ratio(sum(h), len(h)),
                     "agreement": agreement(judge_verdicts, h)}
                 for v, h in rule_by_version.items()},
        "rule_match": config.effective_rule_match,
        "calls": {"planned": len(made), "skipped": sum(r.skipped for r in answers),
                  "answered_from_cache": sum(r.from_cache for r in made),
                  "reasks": sum(max(0, len(r.attempts) - 1) for r in made),
                  "failed": sum(1 for r in made if r.error)},
        "tokens": tokens,
        "cost_usd": usage_cost(tokens, prices.price(config.model),
                               batch_discount=prices.batch_discount if batch else 0.0),
        "static_prompt_share": static / total if total else None,
        "templates": {d: plan.prompts.template_hash(d) for d in plan.prompts.dimensions},
        "prompt_variant": config.prompt_variant,
        "rules": plan.rules.source,
        "errors": {"count": len(errors),
                   "examples": [f"{r['dialogue_id']} turn {r['turn_index']}: {r['error']}"
                                for r in errors[:5]]},
        "data": {"dialogues": plan.dialogues.path, "predictions": plan.predictions.path,
                 "system": plan.predictions.name, "num_dialogues": len(plan.dialogues),
                 "versions": list(versions)},
        "options": config.public_dict(),
        "scale": "percent",
    }
    return EvaluationResult(rows, summary)


@dataclass
class RunProgress:
    """Live counters of a run, passed to the progress callback after every finished call."""

    total: int
    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    spend: Spend | None = None

    def update(self, result: CallResult) -> None:
        self.done += 1
        self.cache_hits += result.from_cache
        self.errors += bool(result.error)


ASSUMED_COMPLETION_TOKENS = 150
"""Reply length assumed by the dry run (GPT-4 explanations run 100-200 tokens)."""
PROVIDER_CACHE_MIN_TOKENS = 1024


def estimate(plan: EvaluationPlan, *, cached_keys: set[str] | None = None) -> dict[str, Any]:
    """Calls, tokens and cost of a run before making it: live, with provider prompt caching,
    and through the Batch API. Tokens are estimated as characters / 4."""
    from ..store import cache_key

    config = plan.config
    prices = load_prices(config.prices)
    price = prices.price(config.model)
    calls = plan.calls
    is_cached = [bool(cached_keys) and cache_key(config.endpoint, c.body,
                                                 c.prompt.template_hash) in cached_keys
                 for c in calls]
    cached = [c for c, hit in zip(calls, is_cached, strict=True) if hit]
    to_send = [c for c, hit in zip(calls, is_cached, strict=True) if not hit]
    prompt = sum(c.prompt.total_chars for c in to_send) // 4
    static = sum(c.prompt.static_chars for c in to_send) // 4
    first_of_prefix = {c.dimension: id(c) for c in reversed(to_send)}
    cacheable = sum(c.prompt.static_chars // 4 for c in to_send
                    if c.prompt.static_chars // 4 >= PROVIDER_CACHE_MIN_TOKENS
                    and first_of_prefix.get(c.dimension) != id(c))
    completion = ASSUMED_COMPLETION_TOKENS * len(to_send)

    def usd(cached_tokens: int, discount: float = 0.0) -> float | None:
        return usage_cost({"prompt_tokens": prompt, "cached_prompt_tokens": cached_tokens,
                           "completion_tokens": completion}, price, batch_discount=discount)

    return {"model": config.model, "priced": price is not None,
            "calls": len(calls), "already_cached": len(cached), "to_send": len(to_send),
            "skipped": sum(1 for t in plan.turns for c in t.calls if c.skipped),
            "prompt_tokens": prompt, "static_prompt_tokens": static,
            "provider_cacheable_tokens": cacheable, "completion_tokens": completion,
            "cost_usd": {"live": usd(0), "live_with_prompt_caching": usd(cacheable),
                         "batch": usd(0, prices.batch_discount)},
            "note": f"tokens estimated as characters / 4; replies assumed "
                    f"{ASSUMED_COMPLETION_TOKENS} tokens"}


def build_manifest(plan: EvaluationPlan, sources: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run's answers depend on, for refusing to resume over changed inputs."""
    rules = asdict(plan.rules)
    rules.pop("source", None)
    return {
        "format": MANIFEST_FORMAT,
        "inputs": {
            "schema": text_digest(plan.schema.model_dump(mode="json")),
            "dialogues": file_digest(plan.dialogues.path),
            "predictions": file_digest(plan.predictions.path),
            "selected_dialogues": text_digest([d.dialogue_id for d in plan.dialogues.dialogues]),
            "rules": text_digest(rules),
        },
        "config": plan.config.answer_identity(),
        "templates": {d: plan.prompts.template_hash(d) for d in plan.prompts.dimensions},
        "sources": {"dialogues": plan.dialogues.path, "predictions": plan.predictions.path,
                    "dialogue_ids": [d.dialogue_id for d in plan.dialogues.dialogues],
                    **(sources or {})},
        "options": plan.config.public_dict(),
    }


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
    from ..store import ResponseCache

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
        result = await run_plan(plan, LiveSource(client), hooks)
    finally:
        await client.aclose()
        if cache is not None:
            cache.close()
        if run_dir is not None:
            run_dir.close()
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
    """Integrate a finished batch's completions exactly as live ones (no re-asks)."""
    plan = plan_evaluation(config, schema, dialogues, predictions, rules=rules)
    result = asyncio.run(run_plan(plan, RecordedSource(records)))
    expected = {call_key(c.dialogue_id, c.turn_index, c.dimension) for c in plan.calls}
    result.summary["calls"]["batch_lines_unused"] = len(set(records) - expected)
    result.summary["calls"]["batch_lines_missing"] = len(expected - set(records))
    return result
