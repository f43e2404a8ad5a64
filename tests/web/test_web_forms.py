"""How the new-run form's strings become job options (``judge.web._runs.parse_options``): a
sampled mutation run found no test of a ticked checkbox or of each type's reading."""

from __future__ import annotations

from judge.web._runs import parse_options


def test_the_run_form_reads_each_option_as_its_type():
    form = {"prompt_cache_key": "on", "temperature": " 0.5 ", "seed": "7", "max_tokens": "x",
            "method": " two-dim ", "model": " m ", "endpoint": "", "limit": "3",
            "dialogue_ids": "a, b\nc,,"}
    assert parse_options(form) == {
        "prompt_cache_key": True, "temperature": 0.5, "seed": 7,
        "max_tokens": "x",  # passed on as typed: the job checker names it
        "method": "two-dim", "model": "m", "limit": 3, "dialogue_ids": ["a", "b", "c"]}


def test_an_empty_form_and_an_unticked_box_set_nothing():
    assert parse_options({}) == {}
    assert parse_options({"prompt_cache_key": "", "temperature": "  ", "limit": ""}) == {}
    assert parse_options({"limit": "-2"}) == {"limit": -2}  # refused later, with its range
    assert parse_options({"limit": "ten"}) == {"limit": "ten"}
