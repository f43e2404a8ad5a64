"""The dry run: calls, tokens and cost of a run before making it (nothing is sent)."""

from __future__ import annotations

from typing import Any

from .._config import JudgeConfig
from ..model import load_prices, usage_cost
from ..store import cache_key, cache_ledger_path, open_cache
from ._plan import EvaluationPlan


def cached_request_keys(config: JudgeConfig) -> set[str]:
    """Keys the reply cache already holds (empty when the cache is off or absent)."""
    old_cache = cache_ledger_path(config.cache_dir).with_name("cache.db")
    if not config.use_cache or not (cache_ledger_path(config.cache_dir).exists()
                                    or old_cache.exists()):
        return set()
    ledger = open_cache(config.cache_dir)
    try:
        return ledger.keys()
    finally:
        ledger.close()


ASSUMED_COMPLETION_TOKENS = 150
"""Reply length assumed by the dry run (GPT-4 explanations run 100-200 tokens)."""
PROVIDER_CACHE_MIN_TOKENS = 1024


def estimate(plan: EvaluationPlan, *, cached_keys: set[str] | None = None) -> dict[str, Any]:
    """Calls, tokens and cost of a run before making it: live, with provider prompt caching,
    and through the Batch API. Tokens are estimated as characters / 4."""
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


def request_keys(plan: EvaluationPlan) -> set[str]:
    """The ledger keys of every request a plan sends first (re-asks are not known before)."""
    endpoint = plan.config.endpoint
    return {cache_key(endpoint, c.body, c.prompt.template_hash) for c in plan.calls}


def estimate_systems(plans: list[EvaluationPlan], *,
                     cached_keys: set[str] | None = None) -> dict[str, Any]:
    """Several systems judged together: each distinct request is sent once. Returns the
    estimate of each system run alone (``separate``), and together, where a request an
    earlier system sends is free for the later ones (``together``), with the totals."""
    cached = set(cached_keys or ())
    separate = [estimate(plan, cached_keys=cached) for plan in plans]
    together, seen = [], set(cached)
    distinct: set[str] = set()
    for plan in plans:
        together.append(estimate(plan, cached_keys=seen))
        keys = request_keys(plan)
        distinct |= keys
        seen |= keys

    def cost(figures: list[dict[str, Any]], kind: str) -> float | None:
        values = [f["cost_usd"][kind] for f in figures]
        return None if any(v is None for v in values) else sum(values)

    to_send = sum(f["to_send"] for f in together)
    alone = sum(f["to_send"] for f in separate)
    return {"systems": len(plans), "calls": sum(f["calls"] for f in separate),
            "distinct": len(distinct), "already_cached": len(distinct & cached),
            "to_send": to_send, "to_send_separately": alone,
            "saving": 1 - to_send / alone if alone else 0.0,
            "cost_usd": {kind: {"together": cost(together, kind),
                                "separately": cost(separate, kind)}
                         for kind in ("live", "live_with_prompt_caching", "batch")},
            "separate": separate, "together": together}
