"""The dry run: calls, tokens and cost of a run before making it (nothing is sent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._config import JudgeConfig
from ..model import load_prices, usage_cost
from ..store import ResponseCache, cache_key
from ._plan import EvaluationPlan


def cached_request_keys(config: JudgeConfig) -> set[str]:
    """Keys the reply cache already holds (empty when the cache is off or absent)."""
    if not config.use_cache or not Path(config.cache_dir).exists():
        return set()
    cache = ResponseCache(config.cache_dir)
    try:
        return cache.keys()
    finally:
        cache.close()


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
