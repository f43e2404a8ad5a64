"""Asyncio helpers the stages share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def run_to_end(step: Awaitable[T]) -> T:
    """Await ``step``; if the caller is cancelled meanwhile, let ``step`` finish first and
    then re-raise the cancellation. For work that must not stop halfway: a paid reply being
    committed, a created batch whose id is being recorded."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise
