"""The dry run's arithmetic: distinct requests, the prefix-cache rules, prices."""

from __future__ import annotations

import pytest

from judge.model import cost_figures, counter_for, load_prices, tally_requests
from judge.model._cost import OPENAI_CACHE, SLOT_CACHE


def _body(user: str, system: str = "Judge the turn.") -> dict:
    return {"model": "m", "messages": [{"role": "system", "content": system},
                                       {"role": "user", "content": user}]}


def test_cache_rules():
    assert OPENAI_CACHE.cached(1000, 1000) == 0  # below the 1,024-token floor
    assert OPENAI_CACHE.cached(2000, 1100) == 1024
    assert OPENAI_CACHE.cached(2000, 1300) == 1280  # 128-token steps
    assert SLOT_CACHE.cached(50, 50) == 49  # llama-server evaluates the last token again
    assert SLOT_CACHE.cached(50, 30) == 30


def test_duplicates_are_counted_once_and_shared_prefixes_cached():
    counter = counter_for("gpt-4o")
    long = "the user wants a cheap hotel in the north . " * 120  # about 1,300 tokens
    first, second = _body(long + "turn one"), _body(long + "turn two")
    figures = tally_requests([("d1/a", "a", first), ("d1/a", "a", second),
                                 ("d2/a", "a", first)], counter, static_messages={"a": 1})
    assert (figures.requests, figures.distinct) == (3, 2)
    assert figures.prompt_tokens == counter.count_request(first) + counter.count_request(second)
    assert figures.static_prompt_tokens == 2 * counter.count("Judge the turn.")
    # the second shares the first's whole history: cached in 128-token steps from 1,024
    assert figures.cached_prompt_tokens >= 1024 and (figures.cached_prompt_tokens - 1024) % 128 == 0
    short = tally_requests([("c", "a", _body("hi")), ("c", "a", _body("hi there"))], counter)
    assert short.cached_prompt_tokens == 0  # under OpenAI's floor nothing is cached


def test_local_estimate_uses_the_slot_cache():
    counter = counter_for("local")
    bodies = [_body("hello"), _body("hello again")]
    figures = tally_requests([("c", "a", b) for b in bodies], counter)
    first_ids, second_ids = (counter.prompt_ids(b) for b in bodies)
    common = next(i for i, (x, y) in enumerate(zip(first_ids, second_ids, strict=False))
                  if x != y)
    assert figures.cached_prompt_tokens == common


def test_cost_figures_price_cached_tokens_at_the_cached_rate():
    prices = load_prices()
    counter = counter_for("gpt-4o")
    long = "a b c d " * 700
    figures = tally_requests([("c", "a", _body(long + "1")), ("c", "a", _body(long + "2"))],
                                counter, completion_tokens=100)
    cost = cost_figures(figures, prices.price("gpt-4o"), prices.batch_discount)
    live = (figures.prompt_tokens * 2.5 + figures.completion_tokens * 10) / 1e6
    assert cost["live"] == pytest.approx(live)
    assert cost["live_with_prompt_caching"] == pytest.approx(
        live - figures.cached_prompt_tokens * 1.25 / 1e6)
    assert cost["batch"] == pytest.approx(live / 2)
