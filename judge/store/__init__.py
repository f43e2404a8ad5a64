"""Durable stores of paid work: the reply cache (and the ledger of paid calls)."""

from ._cache import (
    ResponseCache,
    cache_key,
)

__all__ = [
    "ResponseCache",
    "cache_key",
]
