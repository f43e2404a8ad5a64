"""Offline token counts: the tokenizer per model, the chat format, the response-format schema,
and agreement with the usage a real llama-server reported in the recorded cassettes."""

from __future__ import annotations

import json
import random

import pytest

from judge.model import counter_for, load_prices, price_and_counter
from judge.model._tokens import FALLBACK_ERROR, common_prefix

from ..conftest import CASSETTES


def test_model_names_pick_their_tokenizer():
    assert counter_for("gpt-4o-2024-08-06").encoding == "o200k_base"
    assert counter_for("gpt-4.1-mini").encoding == "o200k_base"
    assert counter_for("gpt-4-turbo").encoding == "cl100k_base"
    assert counter_for("gpt-3.5-turbo").encoding == "cl100k_base"
    local = counter_for("local")
    assert (local.encoding, local.chat, local.exact) == ("qwen3", "chatml", True)
    unknown = counter_for("some-new-model")
    assert not unknown.exact and unknown.error == FALLBACK_ERROR


def test_o200k_ids_match_the_reference_tokenizer():
    # ids of GitHub's bpe-openai crate (and tiktoken) for the same text
    counter = counter_for("gpt-4o")
    assert counter.encode("hello world, the <|im_start|> train") == [
        24912, 2375, 11, 290, 464, 91, 321, 10949, 91, 29, 8513]
    assert counter_for("gpt-4").encode("hello world") == [15339, 1917]


def test_openai_request_adds_chat_format_and_response_schema():
    counter = counter_for("gpt-4o")
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "hi"}]
    plain = counter.request_tokens({"messages": messages})
    assert plain.messages == [counter.count("Judge."), counter.count("hi")]
    assert plain.overhead == 2 * (3 + 1) + 3  # per message 3 + role; reply priming 3
    assert plain.schema == 0 and plain.total == sum(plain.messages) + plain.overhead
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
              "additionalProperties": False}
    body = {"messages": messages, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": schema}}}
    with_schema = counter.request_tokens(body)
    compact = '{"type":"object","properties":{"a":{"type":"string"}}}'
    assert with_schema.schema == counter.count(compact) + 9
    assert with_schema.total == plain.total + with_schema.schema
    assert len(counter.prompt_ids(body)) == with_schema.total


def test_price_table_can_name_a_tokenizer_for_an_unknown_model(tmp_path):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"models": {"my-model": {
        "input": 1.0, "cached_input": 0.5, "output": 2.0, "tokenizer": "cl100k_base"}}}))
    prices = load_prices(table)
    price, counter = price_and_counter("my-model", prices)
    assert price is not None and price.input == 1.0
    assert counter.encoding == "cl100k_base" and counter.exact
    assert prices.price("gpt-4o") is not None  # the packaged table is still underneath


@pytest.mark.parametrize("cassette", sorted(p.name for p in CASSETTES.glob("*.json")))
def test_local_counts_equal_the_usage_llama_server_reported(cassette):
    """Every request recorded from llama-server (Qwen2.5, ChatML): our count of its prompt
    equals the server's ``usage.prompt_tokens``, token for token."""
    data = json.loads((CASSETTES / cassette).read_text())
    counter = counter_for("local")
    checked = 0
    for interaction in data["interactions"]:
        usage = (interaction["response"].get("body") or {}).get("usage")
        if not usage:
            continue
        assert counter.count_request(interaction["request"]["body"]) == usage["prompt_tokens"]
        checked += 1
    assert checked > 0


def test_common_prefix_matches_a_one_by_one_comparison():
    """The halving comparison gives the same length as walking the ids one by one."""
    def walked(a, b):
        i = 0
        while i < min(len(a), len(b)) and a[i] == b[i]:
            i += 1
        return i

    rng = random.Random(7)
    for _ in range(3000):
        a = [rng.randint(0, 2) for _ in range(rng.randint(0, 40))]
        b = a[:rng.randint(0, len(a))] + [rng.randint(0, 2) for _ in range(rng.randint(0, 9))]
        assert common_prefix(a, b) == common_prefix(b, a) == walked(a, b)
    assert common_prefix([], [1]) == 0 and common_prefix([1, 2], [1, 2]) == 2


def test_counting_a_text_twice_gives_the_same_ids_and_count():
    counter = counter_for("gpt-4o")
    text = "The user asks for a cheap hotel in the centre. " * 20
    first = counter.encode(text)
    first.append(-1)  # a caller changing its list does not change the remembered ids
    assert counter.encode(text) == first[:-1] and counter.count(text) == len(first) - 1
