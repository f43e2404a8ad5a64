"""The asyncio helpers every stage leans on: a bounded wait that never swallows a
cancellation (``asyncio.wait_for`` did, before Python 3.12), and a step that runs to its end."""

from __future__ import annotations

import asyncio
import sys

import pytest

from judge._tasks import run_to_end, within


async def _cancel_as_it_ends(wait) -> str:
    """Cancel a task in the very loop iteration in which what it waits for finishes."""
    event = asyncio.Event()
    task = asyncio.create_task(wait(event.wait(), 10))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    event.set()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "carried on"


def test_within_passes_on_a_cancellation_that_arrives_as_its_step_ends():
    assert asyncio.run(_cancel_as_it_ends(within)) == "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12),
                    reason="Python 3.12 fixed asyncio.wait_for's flaw shown here")
def test_the_flaw_within_avoids_is_real_on_this_python():
    assert asyncio.run(_cancel_as_it_ends(asyncio.wait_for)) == "carried on"


def test_within_returns_the_result_and_raises_the_builtin_timeout_error():
    async def main() -> tuple[int, str, bool]:
        value = await within(asyncio.sleep(0.01, result=7), None)
        slow = asyncio.ensure_future(asyncio.sleep(5))
        try:
            await within(slow, 0.05)
        except TimeoutError as exc:  # the built-in one, on every Python
            message = str(exc)
        await asyncio.sleep(0)
        return value, message, slow.cancelled()

    value, message, cancelled = asyncio.run(main())
    assert value == 7
    assert message == "no result within 0.05 s"
    assert cancelled  # the step does not outlive the timeout


def test_within_cancels_its_step_when_the_caller_is_cancelled():
    async def main() -> bool:
        step = asyncio.ensure_future(asyncio.sleep(5))
        caller = asyncio.create_task(within(step, 10))
        await asyncio.sleep(0.01)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        return step.cancelled()

    assert asyncio.run(main())


def test_within_passes_on_the_steps_own_error():
    async def fails() -> None:
        raise ValueError("the step's own")

    with pytest.raises(ValueError, match="the step's own"):
        asyncio.run(within(fails(), 1))


def test_run_to_end_finishes_its_step_before_the_cancellation_goes_through():
    async def main() -> list[str]:
        seen: list[str] = []

        async def commit() -> None:
            await asyncio.sleep(0.05)
            seen.append("committed")

        caller = asyncio.create_task(run_to_end(commit()))
        await asyncio.sleep(0.01)
        caller.cancel()
        try:
            await caller
        except asyncio.CancelledError:
            seen.append("cancelled")
        return seen

    assert asyncio.run(main()) == ["committed", "cancelled"]


def test_within_gives_the_result_or_error_of_a_step_that_ends_while_cancelled():
    async def stubborn(outcome: str) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # finishing what it started
            if outcome == "error":
                raise RuntimeError("failed while stopping") from None
            return "finished anyway"
        return "never"

    assert asyncio.run(within(stubborn("result"), 0.02)) == "finished anyway"
    with pytest.raises(RuntimeError, match="failed while stopping"):
        asyncio.run(within(stubborn("error"), 0.02))
