"""Canonical JSON and sha256 digests, shared by the cache, the ledger, manifests and bundles.

One definition keeps every key stable: two places that hash "the same" value must agree byte
for byte, or a resumed run would pay again for answers it already holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the one text form that digests are taken of."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def text_digest(value: Any) -> str:
    """sha256 of a JSON value's canonical text: equal values, equal digests."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def sha256_text(text: str) -> str:
    """sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: str | Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """sha256 of a file, streamed in 1 MiB blocks (model weights are too large to read at
    once); ``on_bytes`` hears of every block, for a progress bar."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            if on_bytes is not None:
                on_bytes(len(block))
    return digest.hexdigest()
