"""Root helpers for untrusted text (judge/_io.py): JSON read without recursion, text made safe
for a terminal, and output paths that fail with the path named."""

from __future__ import annotations

import json

import pytest

from judge._errors import JSONTooDeep
from judge._io import check_output_dir, loads, nesting_exceeds, open_output, printable, write_text
from judge.errors import OutputError


@pytest.mark.parametrize(("text", "limit", "over"), [
    ("[]", 1, None), ("[[]]", 1, 1), ('{"a": {"b": [1]}}', 2, 2), ('{"a": {"b": [1]}}', 3, None),
    ('["[[[[[", "{{{{"]', 1, None), (r'["\"[[[[\\", [[1]]]', 2, 2), ("", 0, None),
])
def test_nesting_is_measured_outside_strings(text, limit, over):
    assert nesting_exceeds(text, limit) == over
    assert nesting_exceeds(text.encode(), limit) == over


def test_deep_json_raises_a_decode_error_not_a_recursion_error():
    with pytest.raises(JSONTooDeep) as caught:
        loads("[" * 200_000 + "]" * 200_000)
    assert isinstance(caught.value, json.JSONDecodeError)
    assert "nested deeper than 200 levels" in str(caught.value)
    assert loads('{"a": [1, {"b": "[[[["}]}') == {"a": [1, {"b": "[[[["}]}


def test_printable_strips_terminal_controls_and_keeps_text():
    assert printable("plain [bold] text") == "plain [bold] text"
    assert printable("a\x1b[31mb\x07c\rd\x00e\x9bf\u202eg\u200bh") == "a[31mbcdefgh"
    assert printable("line\nnext\ttab") == "line\nnext\ttab"
    assert printable("line\nnext", newlines=False) == "line next"
    assert printable("naïve — ✓ 日本") == "naïve — ✓ 日本"


def test_output_paths_fail_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path, tmp_path / "file" / "below"):
        with pytest.raises(OutputError) as caught:
            write_text(bad, "data")
        assert str(bad) in str(caught.value)
    with pytest.raises(OutputError, match="No space left"), open_output("/dev/full") as handle:
        handle.write("x" * 10_000)
    assert write_text(tmp_path / "new" / "deeper" / "f.txt", "ok").read_text() == "ok"


def test_output_directories_are_checked_before_work(tmp_path):
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "run", "/proc/dst-judge-test", ""):
        with pytest.raises(OutputError):
            check_output_dir(bad)
    assert check_output_dir(tmp_path / "run").is_dir()
    assert list((tmp_path / "run").iterdir()) == []  # the probe file is gone
