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


async def within(step: Awaitable[T], seconds: float | None) -> T:
    """``step``'s result, or the built-in ``TimeoutError`` after ``seconds`` (``None``: no
    limit), ``step`` then cancelled. Unlike ``asyncio.wait_for`` before Python 3.12, a
    cancellation of the caller that arrives just as ``step`` ends is never swallowed: a worker
    told to stop would otherwise carry on (or wait for ever on a writer that never stops)."""
    task = asyncio.ensure_future(step)
    try:
        done, _ = await asyncio.wait([task], timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        await asyncio.wait([task])  # a cancellation of the caller meanwhile goes through
        if task.cancelled():
            raise TimeoutError(f"no result within {seconds:g} s")
    return task.result()  # or the step's own error (also one it raised while cancelled)
