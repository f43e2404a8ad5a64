"""``validate`` refuses what the loaders refuse and says what a wrong file is: an empty file or
one of blank lines is a problem for every kind, a directory is named as one (not "file not
found"), and a file of another kind is named as that kind in one sentence."""

from __future__ import annotations

import pytest

from judge.cli import main
from judge.data import FILE_KINDS
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("kind", FILE_KINDS)
@pytest.mark.parametrize("content", ["", "\n\n   \n"], ids=["empty", "blank-lines"])
def test_an_empty_file_is_not_a_valid_file_of_any_kind(kind, content, tmp_path, capsys):
    path = tmp_path / "nothing.jsonl"
    path.write_text(content, encoding="utf-8")
    assert main(["validate", kind, str(path)]) == 2
    err = capsys.readouterr().err
    assert "nothing.jsonl" in err and ("is empty" in err or "only blank lines" in err), err
    assert "valid" not in err


@pytest.mark.parametrize("kind", ["dialogues", "predictions"])
def test_evaluate_refuses_the_empty_files_validate_refuses(kind, tmp_path, capsys):
    path = tmp_path / "nothing.jsonl"
    path.write_text("\n \n", encoding="utf-8")
    files = {"dialogues": str(EXAMPLES / "dialogues.jsonl"),
             "predictions": str(EXAMPLES / "predictions.jsonl"), kind: str(path)}
    assert main(["evaluate", "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                 files["dialogues"], "--predictions", files["predictions"], "--dry-run"]) == 2
    assert "nothing.jsonl: file is empty" in capsys.readouterr().err
    assert main(["validate", kind, str(path)]) == 2
    assert "nothing.jsonl: file holds only blank lines" in capsys.readouterr().err


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_a_directory_is_named_as_one(kind, tmp_path, capsys):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert main(["validate", kind, str(folder)]) == 2
    err = capsys.readouterr().err
    assert "a-folder" in err and "not found" not in err, err
    assert "directory" in err or "folder" in err, err
    assert "Traceback" not in err


def test_a_missing_file_is_still_not_found(tmp_path, capsys):
    assert main(["validate", "labels", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: file not found" in capsys.readouterr().err


@pytest.mark.parametrize(("kind", "example", "actual"), [
    ("labels", "predictions.jsonl", "predictions"), ("labels", "dialogues.jsonl", "dialogues"),
    ("sample", "predictions.jsonl", "predictions"),
    ("corrections", "dialogues.jsonl", "dialogues")])
def test_a_file_of_another_kind_is_named_in_one_problem(kind, example, actual, capsys):
    assert main(["validate", kind, str(EXAMPLES / example)]) == 2
    err = capsys.readouterr().err
    assert f"this is a {actual} file, not {kind}" in err
    assert "1 problem in" in err  # not one per field the other kind lacks


@pytest.mark.parametrize("kind", ["dialogues", "predictions"])
def test_a_valid_example_is_still_valid(kind, capsys):
    assert main(["validate", kind, str(EXAMPLES / f"{kind}.jsonl")]) == 0
    assert "valid" in capsys.readouterr().out
