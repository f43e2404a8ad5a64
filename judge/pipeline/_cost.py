"""The dry run: calls, tokens and cost of a run before making it (nothing is sent), with
exact token counts from the model's tokenizer (judge.model).

Named for cost, not "estimate": an estimate in this project is the statistical one of
:mod:`judge.analysis` (a metric from a labelled sample)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from .._config import JudgeConfig
from ..model import (
    ASSUMED_COMPLETION_TOKENS,
    cost_figures,
    load_prices,
    price_and_counter,
    tally_requests,
)
from ..store import cache_key, cache_ledger_path, open_cache
from ._plan import EvaluationPlan, call_chains


class DryRun(TypedDict):
    """What :func:`dry_run` returns (``dst-judge evaluate --dry-run`` prints it)."""

    model: str
    priced: bool
    """Whether the price list knows the model (else every cost is ``None``)."""
    tokenizer: str
    systems: int
    calls: int
    already_cached: int
    to_send: int
    """Distinct requests left to send (a request several calls or systems share counts once)."""
    duplicates: int
    skipped: int
    prompt_tokens: int
    static_prompt_tokens: int
    response_format_tokens: int
    chat_overhead_tokens: int
    provider_cacheable_tokens: int
    completion_tokens: int
    per_dimension: dict[str, dict[str, int]] | None
    cost_usd: dict[str, float | None]
    """Live, live with prefix caching, and through the Batch API."""
    note: str


def cached_request_keys(config: JudgeConfig) -> set[str]:
    """Keys the reply cache already holds (empty when the cache is off or absent)."""
    old_cache = Path(config.cache_dir) / "cache.db"  # diskcache, imported on first open
    if not config.use_cache or not (cache_ledger_path(config.cache_dir).exists()
                                    or old_cache.exists()):
        return set()
    ledger = open_cache(config.cache_dir)
    try:
        return ledger.keys()
    finally:
        ledger.close()


def dry_run(plan: EvaluationPlan, *, cached_keys: set[str] | None = None,
             others: Sequence[EvaluationPlan] = ()) -> DryRun:
    """Calls, tokens and cost of a run before making it: live, with the server's prefix cache
    (in the send order of :func:`call_chains`), and through the Batch API. Tokens are counted
    with the model's tokenizer (:func:`judge.model.tally_requests`). ``others``: plans of
    further systems on the same dialogues; a request several systems share is counted once."""
    config = plan.config
    prices = load_prices(config.prices)
    price, counter = price_and_counter(config.model, prices)
    requests: list[tuple[str, str, dict[str, Any]]] = []
    calls = already = skipped = 0
    for each in (plan, *others):
        for chain in call_chains(each):
            for t, c in chain:
                call = each.turns[t].calls[c]
                if call.skipped:
                    skipped += 1
                    continue
                calls += 1
                if cached_keys and cache_key(config.endpoint, call.body,
                                             call.prompt.template_hash) in cached_keys:
                    already += 1
                    continue
                requests.append((f"{call.dialogue_id}/{call.dimension}", call.dimension,
                                 call.body))
    static: dict[str, int] = {d: len(plan.prompts.static_messages(d))
                              for d in plan.prompts.dimensions}
    figures = tally_requests(requests, counter, static_messages=static)
    return {"model": config.model, "priced": price is not None,
            "tokenizer": counter.encoding if counter.exact else f"{counter.encoding} "
                         f"(estimate, ±{counter.error:.0%})",
            "systems": 1 + len(others),
            "calls": calls, "already_cached": already, "to_send": figures.distinct,
            "duplicates": figures.requests - figures.distinct, "skipped": skipped,
            "prompt_tokens": figures.prompt_tokens,
            "static_prompt_tokens": figures.static_prompt_tokens,
            "response_format_tokens": figures.schema_tokens,
            "chat_overhead_tokens": figures.overhead_tokens,
            "provider_cacheable_tokens": figures.cached_prompt_tokens,
            "completion_tokens": figures.completion_tokens,
            "per_dimension": figures.per_dimension,
            "cost_usd": cost_figures(figures, price, prices.batch_discount),
            "note": f"prompt tokens counted with {counter.encoding}"
                    + ("" if counter.exact else f" (unknown model: ±{counter.error:.0%})")
                    + f"; replies assumed {ASSUMED_COMPLETION_TOKENS} tokens; cached: "
                    + ("llama-server slot cache" if counter.chat == "chatml"
                       else "OpenAI prompt caching, ≥ 1,024-token prompts")}

