"""On-disk cache of model replies (diskcache, eviction off).

The key covers everything that can change an answer: endpoint, model and every generation
parameter (all inside the request body), the rendered messages, the template hash and the hash
of the response schema. Re-running a finished evaluation therefore makes no model call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import diskcache

from .._digest import text_digest


def cache_key(endpoint: str, body: dict[str, Any], template_hash: str) -> str:
    """Stable key of one request."""
    return text_digest({
        "endpoint": endpoint,
        "body": body,
        "template_hash": template_hash,
        "response_schema_hash": text_digest(body.get("response_format") or {}),
    })


class ResponseCache:
    """A persistent map from request key to the recorded completion."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._cache = diskcache.Cache(str(self.directory), eviction_policy="none",
                                      size_limit=2**40)

    def get(self, key: str) -> dict[str, Any] | None:
        value = self._cache.get(key)
        return value if isinstance(value, dict) else None

    def set(self, key: str, record: dict[str, Any]) -> None:
        self._cache.set(key, record)

    def keys(self) -> set[str]:
        return {str(k) for k in self._cache.iterkeys()}

    def stats(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "entries": len(self._cache),
                "size_bytes": self._cache.volume()}

    def clear(self) -> int:
        return self._cache.clear()

    def close(self) -> None:
        self._cache.close()
