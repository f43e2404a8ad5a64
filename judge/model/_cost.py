"""Token and cost accounting from reported usage, with a configurable price table.

Cached prompt tokens (provider prompt caching) are priced separately. A model missing from the
table has no cost (``None``), which the reports say instead of printing a made-up 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .._io import read_json, validation_error
from .._resources import package_dir

PRICES_FILE = "prices.json"


class ModelPrice(BaseModel):
    """USD per million tokens."""

    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)


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


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The packaged price table, or a user's (same JSON layout)."""
    source = Path(path) if path else package_dir("model") / PRICES_FILE
    try:
        return PriceTable.model_validate(read_json(source))
    except ValidationError as exc:
        raise validation_error(exc, path=source, line=None) from None


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
