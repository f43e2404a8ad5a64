"""The loaders' bounds (judge/_io.py, issue 40 items 1 and 2): one gzip layer and never a
second, one JSON Lines record read at most ``MAX_RECORD_BYTES`` at a time, no string in a
record past ``MAX_STRING_CHARS``, names at most ``MAX_NAME_CHARS``; on the command line a
clear message, exit status 2 and bounded memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from judge._errors import InputError
from judge._io import MAX_RECORD_BYTES, iter_jsonl_lines, long_string, read_json, read_text
from tests.netguard.sitecustomize import subprocess_pythonpath
from tests.service.hostile import gzip_stream

ROOT = Path(__file__).resolve().parents[1]
LABEL = {"dialogue_id": "d1", "turn_index": 0, "label": 1}



def test_a_gzip_inside_a_gzip_is_refused_by_every_reader(tmp_path):
    text = json.dumps(LABEL) + "\n"
    once, twice = tmp_path / "once.jsonl.gz", tmp_path / "twice.jsonl.gz"
    once.write_bytes(gzip.compress(text.encode()))
    twice.write_bytes(gzip.compress(gzip.compress(text.encode())))
    assert [line for _, line in iter_jsonl_lines(once)] == [text]
    assert read_json(once) == LABEL
    for read in (lambda p: list(iter_jsonl_lines(p)), read_text, read_json):
        with pytest.raises(InputError, match="gzip inside gzip") as caught:
            read(twice)
        assert caught.value.path == str(twice)


def test_a_line_past_the_record_cap_is_refused_naming_it(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(LABEL) + "\n" + "x" * 5000 + "\n" + "y" * 999 + "\n")
    lines = iter_jsonl_lines(path, max_chars=1000)
    assert next(lines)[0] == 1
    with pytest.raises(InputError, match="longer than the limit of 1,000 characters") as caught:
        next(lines)
    assert caught.value.line == 2
    exact = tmp_path / "exact.jsonl"
    exact.write_text("y" * 1000 + "\n" + "z" * 1000)  # at the cap, with and without newline
    assert [n for n, _ in iter_jsonl_lines(exact, max_chars=1000)] == [1, 2]


@pytest.mark.parametrize(("text", "found"), [
    ('{"a": {"b": ["x", "yyyyy"]}}', ("a.b[1]", 5)),
    ('{"a": "x", "note": "' + "\\u0041" * 3 + '"}', None),  # escapes: 3 characters, not 18
    ('{"zzzzz": 1}', ("(a key)", 5)),
    ('{"k": "yyyyy", "j": "zzzzzz"}', ("k", 5)),
    ("[1, 2]", None), ('{"broken": "yyyyyy', None),
])
def test_long_string_names_the_first_string_past_the_limit(text, found):
    assert long_string(text, 4) == found


def _run_cli(*args: str) -> tuple[int, str, float]:
    """``python -m judge ARGS``: exit status, stderr and the peak RSS in MB (sampled every
    5 ms with psutil until it ends)."""
    import psutil

    env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "judge", *args], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watched, peak = psutil.Process(process.pid), 0
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(process.stderr.read()))
    reader.start()
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.005)
    process.wait(300)
    reader.join(10)
    return process.returncode, b"".join(err).decode(errors="replace"), peak / 2 ** 20


@pytest.fixture(scope="module")
def baseline_mb() -> float:
    """The peak RSS of the same command on a good file (mostly the interpreter's imports)."""
    pytest.importorskip("psutil")
    status, err, peak = _run_cli("validate", "dialogues",
                                 str(ROOT / "examples" / "dialogues.jsonl"))
    assert status == 0, err
    return peak


def test_the_cli_refuses_a_nested_gzip_with_a_clear_message_and_exit_2(tmp_path, baseline_mb):
    path = tmp_path / "bomb.jsonl.gz"  # gzip(gzip(300 MB of zeros)): about 660 bytes
    path.write_bytes(gzip.compress(gzip_stream(b"\0" * (1 << 20) for _ in range(300))))
    for command in (["validate", "dialogues"], ["validate", "labels"]):
        status, err, peak = _run_cli(*command, str(path))
        assert status == 2, err
        assert "gzip inside gzip" in err and "bomb.jsonl.gz" in err and "Traceback" not in err
        assert peak - baseline_mb < 64, f"{command}: {peak - baseline_mb:.0f} MB"


def test_the_cli_refuses_one_300mb_record_without_holding_it(tmp_path, baseline_mb):
    head = json.dumps({**LABEL, "note": ""})[:-2].encode()
    path = tmp_path / "record.jsonl.gz"
    path.write_bytes(gzip_stream(iter([head, *(b"a" * (1 << 20) for _ in range(300)),
                                        b'"}\n'])))
    status, err, peak = _run_cli("validate", "labels", str(path))
    assert status == 2, err
    assert "record.jsonl.gz:1:" in err and "longer than the limit" in err
    # a line is read at most MAX_RECORD_BYTES characters at a time (held about twice over)
    assert peak - baseline_mb < 3 * MAX_RECORD_BYTES / 2 ** 20, f"{peak - baseline_mb:.0f} MB"


@pytest.mark.parametrize(("field", "length", "message"), [
    ("reviewer", 15 << 20, "the limit for one string is"),
    ("reviewer", 201, ""), ("annotator", 201, "")])
def test_the_cli_refuses_a_long_reviewer_name(tmp_path, field, length, message):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(LABEL) + "\n" + json.dumps({**LABEL, "turn_index": 1,
                                                          field: "n" * length}) + "\n")
    from judge.analysis import load_labels

    with pytest.raises(InputError) as caught:
        load_labels(path)
    assert caught.value.line == 2 and caught.value.field == field
    assert message in str(caught.value)
    status, err, _ = _run_cli("validate", "labels", str(path))
    assert status == 2, err
    assert "labels.jsonl:2" in err and field in err and "Traceback" not in err
