"""Parsing judge replies: shapes seen in real GPT-4 Turbo and local-model output."""

from __future__ import annotations

import pytest

from judge.method._parse import InvalidOutput, extract_json_text, parse_reply


def test_bare_json():
    j = parse_reply('{"explanation": "fine", "incorrect_domain_slot": {}}', "accuracy")
    assert j.results == {"incorrect_domain_slot": {}} and j.explanation == "fine"


def test_fenced_json_with_prose_around():
    text = ('Let me check.\n```json\n{"explanation": "x", "missed_domain_slot": '
            '{"hotel-area": "north"}}\n```\nDone.')
    assert parse_reply(text, "completeness").results == {
        "missed_domain_slot": {"hotel-area": "north"}}


def test_naming_variant_slot_keys_are_kept_verbatim_for_the_filters():
    text = ('{"explanation": "", "incorrect_domain_slot": {"Hotel-Price Range": "cheap", '
            '"restaurant-book_day": "monday", "Train - leave at": "10:00", "hotel-phone": "1"}}')
    keys = parse_reply(text, "accuracy").results["incorrect_domain_slot"]
    assert list(keys) == ["Hotel-Price Range", "restaurant-book_day", "Train - leave at",
                          "hotel-phone"]


@pytest.mark.parametrize("value", ['""', "null", '"none"', "[]", "5", '["x", "y"]'])
def test_odd_values_are_accepted_as_values(value):
    text = f'{{"explanation": "", "missed_domain_slot": {{"hotel-area": {value}}}}}'
    result = parse_reply(text, "completeness").results["missed_domain_slot"]
    assert "hotel-area" in result


@pytest.mark.parametrize("result", ["null", '""', "[]"])
def test_empty_result_shapes(result):
    text = f'{{"explanation": "", "incorrect_domain_slot": {result}}}'
    assert parse_reply(text, "accuracy").results == {"incorrect_domain_slot": {}}


def test_result_as_list_of_names_or_pairs():
    text = '{"explanation": "", "missed_domain_slots": ["hotel-area", ["hotel-stars", "4"]]}'
    result = parse_reply(text, "completeness").results["missed_domain_slot"]
    assert result == {"hotel-area": None, "hotel-stars": "4"}


def test_joint_needs_both_keys():
    text = '{"explanation": "", "incorrect_domain_slot": {}}'
    with pytest.raises(InvalidOutput, match="missed_domain_slot"):
        parse_reply(text, "joint")


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    ("   ", "empty"),
    (None, "empty"),
    ('{"explanation": "cut off here', "not valid JSON"),
    ('```json\n{"explanation": "x", "incorrect_domain_slot": {"a": 1\n```', "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"explanation": "x"}', "lacks the key"),
    ('{"explanation": "x", "incorrect_domain_slot": "hotel-area"}', "must be an object"),
    ("__import__('os').system('echo pwned')", "not valid JSON"),
])
def test_invalid_replies(text, message):
    with pytest.raises(InvalidOutput, match=message):
        parse_reply(text, "accuracy")


def test_extract_prefers_fence_then_outer_braces():
    assert extract_json_text('x ```{"a": 1}``` y') == '{"a": 1}'
    assert extract_json_text('note {"a": {"b": 2}} end') == '{"a": {"b": 2}}'
