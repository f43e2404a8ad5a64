"""Answer planned calls: from a live model (through the ledger) or a finished batch, with
bounded re-asks of invalid replies, resumption from a run log, the spending limit and a
graceful stop.

Live calls and collected Batch API output take exactly the same path; only the source of
completions differs. A call holds one concurrency slot from its first send to its last re-ask,
so a re-ask never waits behind calls that have not started. When the run must stop (budget,
Ctrl-C or SIGTERM, a fatal error) no new request is sent, calls in flight get a grace period to
finish and be recorded, and only then is the rest cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._errors import BudgetReached, ModelError
from ..method import InvalidOutput, parse_reply
from ..model import Completion, ModelClient, Spend, call_key
from ._plan import EvaluationPlan, PlannedCall, call_chains

STOP_GRACE = 10.0
"""Seconds calls in flight may take to finish once a run is told to stop."""

_REASK = ("Your reply could not be used: {error}. Answer again with only the JSON object in the "
          "format described above, and nothing else.")


class CompletionSource(Protocol):
    """Where completions come from: a live model or a finished batch.

    A source may also have ``prepare(call: PlannedCall) -> None``: a hint that ``call`` comes
    next in its chain. It is optional (sources without it are never hinted), which a protocol
    member cannot say, so :func:`answer_plans` looks it up with ``getattr``."""

    can_reask: bool
    batch: bool
    """Replies came through the Batch API (priced with its discount)."""

    def hold(self) -> AbstractAsyncContextManager[Any]:
        """What one call holds from its first request to its last re-ask (a slot)."""
        ...

    async def answer(self, call: PlannedCall, body: dict[str, Any], held: Any) -> Completion: ...


class LiveSource:
    """Completions from the model (through the ledger)."""

    can_reask = True
    batch = False

    def __init__(self, client: ModelClient) -> None:
        self.client = client

    def hold(self) -> AbstractAsyncContextManager[Any]:
        return self.client.holding()

    async def answer(self, call: PlannedCall, body: dict[str, Any], held: Any) -> Completion:
        return await self.client.complete(body, template_hash=call.prompt.template_hash,
                                          slot=held)

    def prepare(self, call: PlannedCall) -> None:
        """Claim the next call of a chain in the ledger while the current one is on the wire."""
        self.client.claim_ahead(call.body, template_hash=call.prompt.template_hash)


class RecordedSource:
    """Completions read from a Batch API output file; a missing line is an error row."""

    can_reask = False
    batch = True

    def __init__(self, records: dict[tuple[str, int, str], Completion | ModelError]) -> None:
        self.records = records

    def hold(self) -> AbstractAsyncContextManager[Any]:
        return contextlib.nullcontext()

    async def answer(self, call: PlannedCall, body: dict[str, Any], held: Any) -> Completion:
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

    @classmethod
    def from_log(cls, entry: dict[str, Any]) -> CallResult:
        """A call as the run log recorded it (fields of other versions are left out)."""
        return cls(**{k: entry[k] for k in _FIELDS if k in entry})

    @property
    def from_cache(self) -> bool:
        """Answered by the response cache (its first attempt was never sent)."""
        return bool(self.attempts and self.attempts[0].get("cached"))

    def billed_usage(self, *, batch: bool | None = None) -> Iterator[dict[str, int]]:
        """Token usage of the attempts that were really sent (cache answers cost nothing);
        with ``batch`` True or False, only those sent through the Batch API or live."""
        for attempt in self.attempts:
            if not attempt.get("cached") and (
                    batch is None or bool(attempt.get("batch")) == batch):
                yield attempt.get("usage") or {}


_FIELDS = tuple(CallResult.__dataclass_fields__)


@dataclass
class RunControl:
    """What every call of one invocation shares (all systems of a multi-system run): the
    spending limit, the stop signal and its grace period."""

    spend: Spend | None = None
    budget: float | None = None
    grace: float = STOP_GRACE
    stop_reason: BaseException | None = None
    """Why the run is stopping (the exception the run will end with); None while it runs."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to cancel calls in flight at once (a second Ctrl-C)."""

    def stop(self, reason: BaseException) -> None:
        """Send nothing more; the run ends with ``reason`` after the grace period."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stopping.set()

    def before_send(self) -> None:
        """Called before every request goes out: refuse once stopping or over budget."""
        if self.stop_reason is not None:
            raise self.stop_reason
        self.check_budget()

    def check_budget(self) -> None:
        if self.budget is not None and self.spend is not None and self.spend.usd >= self.budget:
            raise BudgetReached(f"budget reached: {self.spend.usd:.4f} USD spent of "
                                f"{self.budget:.4f}")


@dataclass
class RunHooks:
    """Per-run behaviour around calls: results already known (resume), a callback for each
    finished call (run log, progress), and the shared :class:`RunControl`."""

    done: dict[str, CallResult] = field(default_factory=dict)
    on_result: Callable[[CallResult], None] | None = None
    control: RunControl = field(default_factory=RunControl)

    def finished_before(self, result: CallResult) -> None:
        """Account a call finished by an earlier attempt of this run (resume)."""
        if self.control.spend is not None:
            for usage in result.billed_usage():
                self.control.spend.add(usage)

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
    async with source.hold() as held:
        return await _attempts(call, source, reasks, result, held)


async def _attempts(call: PlannedCall, source: CompletionSource, reasks: int,
                    result: CallResult, held: Any) -> CallResult:
    """The first request and its re-asks, each built on the reply before it."""
    body = call.body
    for attempt in range(reasks + 1):
        try:
            completion = await source.answer(call, body, held)
        except ModelError as exc:
            if exc.fatal:
                raise
            result.error = f"model error: {exc}"
            return result
        result.attempts.append({**completion.record(), "cached": completion.cached,
                                **({"batch": True} if source.batch else {})})
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
    """Answer every call of the plan (skipped ones included, in plan order)."""
    hooks = hooks or RunHooks()
    return (await answer_plans([(plan, hooks)], source, hooks.control))[0]


async def answer_plans(jobs: Sequence[tuple[EvaluationPlan, RunHooks]],
                       source: CompletionSource, control: RunControl) -> list[list[CallResult]]:
    """Answer every call of several plans at once through one source (one ledger: a request
    two plans share is sent once); each plan's answers come back in plan order.

    ``concurrency`` workers each take the next chain of :func:`call_chains` (one dialogue's
    calls of one dimension, of any plan) and send its calls in turn order, keeping prefixes
    warm; a re-ask is sent by the worker of its call, before that worker starts another.

    The first call that raises (budget, a fatal model error) or :meth:`RunControl.stop` (a
    signal) stops the run: no worker starts another call, calls in flight have
    ``control.grace`` seconds to finish and be recorded, the rest is cancelled, and the
    reason is raised.
    """
    answers: list[list[list[CallResult | None]]] = [
        [[None] * len(t.calls) for t in plan.turns] for plan, _ in jobs]
    chains = [(j, chain) for j, (plan, _) in enumerate(jobs) for chain in call_chains(plan)]
    pending = iter(chains)

    prepare = getattr(source, "prepare", None)

    async def worker() -> None:
        for j, chain in pending:  # the shared iterator hands each chain to one worker
            plan, hooks = jobs[j]
            for position, (t, c) in enumerate(chain):
                if control.stop_reason is not None:
                    return
                if prepare is not None:  # the next call's claim rides on this one's wait
                    upcoming = _next_to_send(plan, hooks, chain, position + 1)
                    if upcoming is not None:
                        prepare(upcoming)
                answers[j][t][c] = await judge_call(plan.turns[t].calls[c], source,
                                                    plan.config.reasks, hooks)

    concurrency = max((plan.config.concurrency for plan, _ in jobs), default=1)
    tasks = [asyncio.ensure_future(worker())
             for _ in range(max(1, min(concurrency, len(chains))))]
    everything = asyncio.gather(*tasks)
    stop_wait = asyncio.ensure_future(control.stopping.wait())
    waiting: set[asyncio.Future[Any]] = {everything, stop_wait}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if everything.done():
            error = everything.exception()
            if error is None and control.stop_reason is None:
                return [[r for turn in plan_answers for r in turn if r is not None]
                        for plan_answers in answers]
            if error is not None:
                control.stop(error)
        await _grace(tasks, control)
    finally:
        stop_wait.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if everything.done() and not everything.cancelled():
            everything.exception()  # retrieved
    assert control.stop_reason is not None
    raise control.stop_reason


def _next_to_send(plan: EvaluationPlan, hooks: RunHooks, chain: list[tuple[int, int]],
                  start: int) -> PlannedCall | None:
    """The first call of ``chain`` from ``start`` on that will be sent (not skipped, not
    answered by an earlier attempt of the run)."""
    for t, c in chain[start:]:
        call = plan.turns[t].calls[c]
        if not call.skipped and call.custom_id not in hooks.done:
            return call
    return None


async def _grace(tasks: Sequence[asyncio.Future[None]], control: RunControl) -> None:
    """Let calls in flight finish (and be recorded) for up to ``control.grace`` seconds."""
    pending = [t for t in tasks if not t.done()]
    if not pending:
        return
    finished = asyncio.ensure_future(asyncio.wait(pending, timeout=control.grace))
    aborted = asyncio.ensure_future(control.abort.wait())
    try:
        await asyncio.wait({finished, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        finished.cancel()
        aborted.cancel()


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
