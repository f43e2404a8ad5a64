"""A JSON Lines line cut off (a truncated copy or download) is reported with its line, its
column and "the line ends early", by the CLI's readers and by the service's upload."""

from __future__ import annotations

import json

import pytest

from judge import InputError
from judge._io import json_error_message
from judge.cli import main
from judge.data import validate_file
from tests.conftest import EXAMPLES


def _cut(tmp_path, *, newline: bool, crlf: bool = False):
    """The example predictions with line 2 cut in the middle of a string (a key)."""
    lines = (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    cut = lines[1][:lines[1].index("pred_state") + 4]  # inside the string "pred_state"
    end = "\r\n" if crlf else "\n"
    text = end.join([lines[0], cut]) + (end + end.join(lines[2:]) + end if newline else "")
    path = tmp_path / "cut.jsonl"
    path.write_bytes(text.encode())
    return path, len(cut)


@pytest.mark.parametrize(("newline", "crlf"), [(True, False), (False, False), (True, True)])
def test_validate_names_line_column_and_the_cut(tmp_path, newline, crlf):
    path, length = _cut(tmp_path, newline=newline, crlf=crlf)
    (problem,) = validate_file("predictions", path)
    assert problem.line == 2
    column = int(problem.reason.split("at column ")[1].split(":")[0])
    assert length - 10 <= column <= length + 1  # the open string, or where the line stops
    assert "the line ends early" in problem.reason and "control character" not in problem.reason


def test_evaluate_names_line_column_and_the_cut(tmp_path, capsys):
    path, _ = _cut(tmp_path, newline=True)
    code = main(["evaluate", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}:2: invalid JSON at column" in err and "the line ends early" in err
    assert "line 1 column" not in err and "column 0" not in err


def test_a_whole_file_cut_off_and_an_error_that_is_not_a_cut(tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text((EXAMPLES / "schema.json").read_text(encoding="utf-8")[:300])
    with pytest.raises(InputError, match=r"line \d+, column \d+: .*the file ends early"):
        validate_file("schema", schema)
    try:
        json.loads('{"a": 1,, "b": 2}')
    except json.JSONDecodeError as exc:
        message = json_error_message(exc)
    assert message == "invalid JSON at column 9: expecting property name enclosed in double " \
                      "quotes"  # the text goes on after the error: not a cut
