"""Reply validation (judge/model/_reply.py): every field of a chat completion is checked,
secrets are removed from every string kept, and the caps apply."""

from __future__ import annotations

import json
import re

import pytest

from judge.errors import ReplyError
from judge.model import (
    Completion,
    ReplyLimits,
    cached_completion,
    completion_from_body,
    parse_chat_reply,
)

KEY = "sk-unit-test-key-000000000000000000000"


def reply(**changes):
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "system_fingerprint": "fp",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": '{"a": 1}'}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                      "prompt_tokens_details": {"cached_tokens": 4}}}
    body.update(changes)
    return body


def raw(**changes) -> bytes:
    return json.dumps(reply(**changes)).encode()


def test_a_well_formed_reply():
    completion = parse_chat_reply(raw())
    assert completion == Completion('{"a": 1}', "stop", None,
                                    {"prompt_tokens": 10, "completion_tokens": 2,
                                     "cached_prompt_tokens": 4}, "m", "chatcmpl-1",
                                    system_fingerprint="fp")


def test_text_parts_are_joined_and_refusal_parts_are_refusals():
    parts = [{"type": "text", "text": '{"a": '}, {"type": "text", "text": "1}"}]
    message = {"role": "assistant", "content": parts}
    assert parse_chat_reply(raw(choices=[{"message": message}])).text == '{"a": 1}'
    refused = {"content": [{"type": "refusal", "refusal": "no"}]}
    completion = parse_chat_reply(raw(choices=[{"message": refused}]))
    assert completion.text is None and completion.refusal == "no"


def test_missing_usage_counts_zero():
    assert parse_chat_reply(raw(usage=None)).usage == {
        "prompt_tokens": 0, "completion_tokens": 0, "cached_prompt_tokens": 0}


@pytest.mark.parametrize(("changes", "field"), [
    ({"usage": {"prompt_tokens": "12"}}, "usage.prompt_tokens"),
    ({"usage": {"prompt_tokens": -1}}, "usage.prompt_tokens"),
    ({"usage": {"completion_tokens": 2.0}}, "usage.completion_tokens"),
    ({"usage": {"prompt_tokens": True}}, "usage.prompt_tokens"),
    ({"choices": "x"}, "choices"),
    ({"choices": {"0": {}}}, "choices"),
    ({"choices": []}, "choices"),
    ({"choices": [{"message": {"content": 3}}]}, "choices[0].message.content"),
    ({"choices": [{"message": {"content": "x", "refusal": 1}}]}, "choices[0].message.refusal"),
    ({"choices": [{"message": {"content": "x"}, "finish_reason": 1}]},
     "choices[0].finish_reason"),
    ({"id": ["x"]}, "id"),
])
def test_each_field_is_checked(changes, field):
    with pytest.raises(ReplyError, match=re.escape(f"field '{field}'")):
        parse_chat_reply(raw(**changes))


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "not JSON"), (b"<html>", "not JSON"), (b"[]", "not a chat completion object"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64"),
])
def test_not_a_chat_completion(content, reason):
    with pytest.raises(ReplyError, match=reason):
        parse_chat_reply(content)


def test_caps_on_size_depth_and_content_length():
    limits = ReplyLimits(max_bytes=2000, max_depth=8, max_chars=1000)
    with pytest.raises(ReplyError, match="2,000"):
        parse_chat_reply(b" " * 2001, limits=limits)
    deep = reply()
    deep["extra"] = json.loads("[" * 9 + "]" * 9)
    with pytest.raises(ReplyError, match="deeper than 8"):
        parse_chat_reply(json.dumps(deep).encode(), limits=limits)
    long = reply(choices=[{"message": {"content": "x" * 1001}}])
    with pytest.raises(ReplyError, match="1,001 characters"):
        parse_chat_reply(json.dumps(long).encode(), limits=limits)


def test_the_key_is_removed_from_every_string_kept():
    echo = f"echo {KEY}"
    body = reply(id=echo, model=echo, system_fingerprint=echo,
                 choices=[{"finish_reason": "stop",
                           "message": {"content": echo, "refusal": echo}}])
    completion = parse_chat_reply(json.dumps(body).encode(), secret=KEY)
    assert KEY not in json.dumps(completion.record())
    assert completion.response_id == completion.model == "echo <redacted>"
    with pytest.raises(ReplyError) as caught:
        parse_chat_reply(raw(choices=[{"message": {"content": 5}}], id=KEY), secret=KEY)
    assert KEY not in str(caught.value)


def test_batch_bodies_take_the_same_checks():
    assert completion_from_body(reply()).text == '{"a": 1}'
    with pytest.raises(ReplyError, match=r"usage\.prompt_tokens"):
        completion_from_body(reply(usage={"prompt_tokens": "1"}))
    with pytest.raises(ReplyError, match="not a chat completion"):
        completion_from_body(["x"])


def test_cache_records_that_are_not_completions_are_never_served():
    good = parse_chat_reply(raw()).record()
    assert cached_completion(good).text == '{"a": 1}'
    assert cached_completion(good).cached
    for bad in (None, "x", {**good, "text": 5}, {**good, "usage": {"prompt_tokens": "1"}},
                {**good, "text": "x" * 200_000}):
        assert cached_completion(bad) is None
