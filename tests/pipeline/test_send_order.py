"""Cache-aware send order: the calls of one dialogue and dimension go out one after another,
in turn order, so each finds the previous turn's prompt (which it extends) in the cache."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from judge import load_config
from judge.model import Completion
from judge.pipeline import call_chains, plan_evaluation
from judge.pipeline._answer import answer_plan
from judge.pipeline._result import build_result


class _OrderSource:
    can_reask = False
    batch = False

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, int]] = []
        self.in_flight = 0
        self.peak = 0

    def hold(self):
        return contextlib.nullcontext()

    async def answer(self, call, body, held):
        self.sent.append((call.dialogue_id, call.dimension, call.turn_index))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        key = "incorrect_domain_slot" if call.dimension == "accuracy" else "missed_domain_slot"
        return Completion(text=json.dumps({"explanation": "", key: {}}), finish_reason="stop")


@pytest.mark.parametrize("concurrency", [1, 3])
def test_calls_of_a_dialogue_dimension_go_in_turn_order(example_data, concurrency):
    config = load_config({"model": "m", "concurrency": concurrency})
    plan = plan_evaluation(config, *example_data)
    source = _OrderSource()
    result = build_result(plan, asyncio.run(answer_plan(plan, source)))
    assert len(source.sent) == len(plan.calls) and result.summary["error_turns"] == 0
    assert source.peak <= concurrency
    by_chain: dict[tuple[str, str], list[int]] = {}
    for dialogue, dimension, turn in source.sent:
        by_chain.setdefault((dialogue, dimension), []).append(turn)
    assert all(turns == sorted(turns) for turns in by_chain.values())
    if concurrency == 1:  # one chain after another: accuracy of a dialogue, then completeness
        firsts = [(d, dim) for d, dim, _ in source.sent]
        runs = [k for i, k in enumerate(firsts) if i == 0 or firsts[i - 1] != k]
        assert len(runs) == len(by_chain)
    assert len(call_chains(plan)) == 2 * len(plan.dialogues)
