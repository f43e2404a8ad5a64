"""Answer planned calls: from a live model (through the cache) or a finished batch, with bounded
re-asks of invalid replies, resumption from a run log, and the spending limit.

Live calls and collected Batch API output take exactly the same path; only the source of
completions differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._errors import BudgetReached, ModelError
from ..method import InvalidOutput, parse_reply
from ..model import Completion, ModelClient, Spend, call_key
from ._plan import EvaluationPlan, PlannedCall, call_chains

_REASK = ("Your reply could not be used: {error}. Answer again with only the JSON object in the "
          "format described above, and nothing else.")


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


async def answer_plan(plan: EvaluationPlan, source: CompletionSource,
                      hooks: RunHooks | None = None) -> list[CallResult]:
    """Answer every call of the plan (skipped ones included; returned in plan order).
    ``concurrency`` workers each take the next chain of :func:`call_chains` (one dialogue's
    calls of one dimension) and send its calls in turn order, keeping prefixes warm."""
    chains = call_chains(plan)
    answers: list[list[CallResult | None]] = [[None] * len(t.calls) for t in plan.turns]
    pending = iter(chains)

    async def worker() -> None:
        for chain in pending:  # the shared iterator hands each chain to one worker
            for t, c in chain:
                answers[t][c] = await judge_call(plan.turns[t].calls[c], source,
                                                 plan.config.reasks, hooks)

    tasks = [asyncio.ensure_future(worker())
             for _ in range(max(1, min(plan.config.concurrency, len(chains))))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [r for turn in answers for r in turn if r is not None]


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
