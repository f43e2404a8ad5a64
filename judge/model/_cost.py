"""Token and cost accounting from reported usage, with a configurable price table.

Cached prompt tokens (provider prompt caching) are priced separately. A model missing from the
table has no cost (``None``), which the reports say instead of printing a made-up 0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .._io import read_json, validation_error
from .._resources import package_dir
from ._tokens import TokenCounter, common_prefix, counter_for

PRICES_FILE = "prices.json"


class ModelPrice(BaseModel):
    """USD per million tokens, and optionally the model's tokenizer for the dry run."""

    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)
    tokenizer: Literal["o200k_base", "cl100k_base", "qwen3"] | None = Field(
        None, description="Encoding for counting this model's tokens (default: by name).")


class PriceTable(BaseModel):
    note: str = ""
    batch_discount: float = Field(0.5, ge=0, le=1)
    models: dict[str, ModelPrice]

    def price(self, model: str) -> ModelPrice | None:
        """Exact name, else the longest table name the model name starts with
        (``gpt-4o-2024-08-06`` → ``gpt-4o``)."""
        if model in self.models:
            return self.models[model]
        prefixes = [name for name in self.models if model.startswith(name)]
        return self.models[max(prefixes, key=len)] if prefixes else None


def _read_table(source: Path) -> PriceTable:
    try:
        return PriceTable.model_validate(read_json(source))
    except ValidationError as exc:
        raise validation_error(exc, path=source, line=None) from None


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The packaged price table, with a user's table (same JSON layout) laid over it: the
    user's models replace or add to the packaged ones, and its ``batch_discount`` (if given)
    wins."""
    packaged = _read_table(package_dir("model") / PRICES_FILE)
    if not path:
        return packaged
    user = _read_table(Path(path))
    discount = (user.batch_discount if "batch_discount" in user.model_fields_set
                else packaged.batch_discount)
    return PriceTable(note=user.note or packaged.note, batch_discount=discount,
                      models={**packaged.models, **user.models})


def price_and_counter(model: str, prices: PriceTable) -> tuple[ModelPrice | None, TokenCounter]:
    """The price of ``model`` and the token counter the dry run uses for it."""
    price = prices.price(model)
    return price, counter_for(model, encoding=price.tokenizer if price else None)


def usage_cost(usage: dict[str, int], price: ModelPrice | None, *,
               batch_discount: float = 0.0) -> float | None:
    """Cost of one reply's usage; cached prompt tokens at the cached rate."""
    if price is None:
        return None
    prompt = int(usage.get("prompt_tokens", 0))
    cached = min(int(usage.get("cached_prompt_tokens", 0)), prompt)
    output = int(usage.get("completion_tokens", 0))
    usd = ((prompt - cached) * price.input + cached * price.cached_input
           + output * price.output) / 1_000_000
    return usd * (1 - batch_discount)


@dataclass
class Spend:
    """Running totals of a run: tokens and money."""

    price: ModelPrice | None
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0

    def add(self, usage: dict[str, int]) -> None:
        self.prompt_tokens += int(usage.get("prompt_tokens", 0))
        self.cached_prompt_tokens += int(usage.get("cached_prompt_tokens", 0))
        self.completion_tokens += int(usage.get("completion_tokens", 0))
        cost = usage_cost(usage, self.price)
        if cost is not None:
            self.usd += cost


ASSUMED_COMPLETION_TOKENS = 150
"""Reply length the dry run assumes (GPT-4-class explanations run 100-200 tokens)."""


@dataclass(frozen=True)
class PrefixCacheRule:
    """How a server reuses the prompt prefix of earlier requests.

    OpenAI caches prompts of at least 1,024 tokens, in steps of 128 tokens, for prefixes it saw
    recently on the same route; llama-server keeps each slot's last prompt and reuses the
    common prefix token for token, except the last prompt token, which it always evaluates.
    """

    name: str
    minimum: int
    step: int
    recompute_last: bool = False
    only_previous: bool = False
    """Only the previous request's prompt is kept (one llama-server slot)."""

    def cached(self, prompt_tokens: int, common: int) -> int:
        if self.recompute_last:
            common = min(common, prompt_tokens - 1)
        if prompt_tokens < self.minimum or common < self.minimum:
            return 0
        return self.minimum + (common - self.minimum) // self.step * self.step


OPENAI_CACHE = PrefixCacheRule("OpenAI prompt caching (≥ 1,024 tokens, 128-token steps)", 1024, 128)
SLOT_CACHE = PrefixCacheRule("llama-server slot cache (common prefix with the slot's last "
                             "prompt)", 1, 1, recompute_last=True, only_previous=True)


@dataclass
class RequestTally:
    """Token and cost figures of a list of requests, before sending them."""

    requests: int = 0
    distinct: int = 0
    prompt_tokens: int = 0
    """Prompt tokens of the distinct requests (what is billed)."""
    static_prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """Prompt tokens the prefix cache would serve, in the planned send order."""
    schema_tokens: int = 0
    overhead_tokens: int = 0
    completion_tokens: int = 0
    per_dimension: dict[str, dict[str, int]] | None = None


def _body_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def tally_requests(requests: Sequence[tuple[str, str, dict[str, Any]]],
                   counter: TokenCounter, *, static_messages: dict[str, int] | None = None,
                   completion_tokens: int = ASSUMED_COMPLETION_TOKENS,
                   dedupe: bool = True) -> RequestTally:
    """Count the prompt tokens of ``requests`` — ``(chain, dimension, body)`` in send order,
    where a chain is a run of calls sent one after another (one dialogue's calls of one
    dimension) — once per distinct body, and the part a prefix cache would serve.

    ``static_messages[dimension]`` leading messages of a body (default 1: the system message;
    few-shot examples add theirs) are the same for every call of that dimension: they are
    counted as the static part. ``dedupe=False`` counts a body sent twice twice.
    """
    rule = SLOT_CACHE if counter.chat == "chatml" else OPENAI_CACHE
    seen: set[str] = set()
    last_in_chain: dict[str, list[int]] = {}
    last_of_dimension: dict[str, list[int]] = {}
    previous: list[int] = []
    per_dimension: dict[str, dict[str, int]] = {}
    out = RequestTally(per_dimension=per_dimension)
    for chain, dimension, body in requests:
        out.requests += 1
        if dedupe:
            digest = _body_digest(body)
            if digest in seen:
                continue
            seen.add(digest)
        out.distinct += 1
        tokens = counter.request_tokens(body)
        ids = counter.prompt_ids(body)
        candidates = ([previous] if rule.only_previous else
                      [last_in_chain.get(chain), last_of_dimension.get(dimension), previous])
        common = max((common_prefix(ids, c) for c in candidates if c), default=0)
        cached = rule.cached(tokens.total, common)
        out.prompt_tokens += tokens.total
        out.static_prompt_tokens += sum(tokens.messages[:(static_messages or {}).get(
            dimension, 1)])
        out.cached_prompt_tokens += cached
        out.schema_tokens += tokens.schema
        out.overhead_tokens += tokens.overhead
        out.completion_tokens += completion_tokens
        figures = per_dimension.setdefault(dimension, {"calls": 0, "prompt_tokens": 0})
        figures["calls"] += 1
        figures["prompt_tokens"] += tokens.total
        last_in_chain[chain] = last_of_dimension[dimension] = previous = ids
    return out


def cost_figures(tally: RequestTally, price: ModelPrice | None,
                 batch_discount: float) -> dict[str, float | None]:
    """Live, live with prefix caching, and Batch API cost of a tally of requests."""
    def usd(cached: int, discount: float = 0.0) -> float | None:
        return usage_cost({"prompt_tokens": tally.prompt_tokens,
                           "cached_prompt_tokens": cached,
                           "completion_tokens": tally.completion_tokens}, price,
                          batch_discount=discount)

    return {"live": usd(0), "live_with_prompt_caching": usd(tally.cached_prompt_tokens),
            "batch": usd(0, batch_discount)}


def usage_check(sent: Sequence[tuple[str, str, dict[str, Any], dict[str, int]]],
                counter: TokenCounter) -> dict[str, Any]:
    """Our counts against what the server reported, for requests really sent:
    ``(chain, dimension, body, usage)`` in send order."""
    if not sent:
        return {"requests": 0}
    figures = tally_requests([(c, d, b) for c, d, b, _ in sent], counter, dedupe=False)
    reported = sum(int(u.get("prompt_tokens", 0)) for *_, u in sent)
    cached = sum(int(u.get("cached_prompt_tokens", 0)) for *_, u in sent)
    return {"requests": figures.requests, "tokenizer": counter.encoding,
            "prompt_tokens": {"counted": figures.prompt_tokens, "reported": reported,
                              "error": (figures.prompt_tokens - reported) / reported
                              if reported else None},
            "cached_prompt_tokens": {"estimated": figures.cached_prompt_tokens,
                                     "reported": cached}}
