"""Every CLI writer given a ``.gz`` name writes gzip (issue 40, item 10): the file is a gzip
stream holding what the plain name would hold, and the project's readers read it back. A
meta-test walks the command line so that a new output option cannot skip this check."""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from judge import load_dialogues
from judge.analysis import load_sample
from judge.cli import build_parser, main

from ..conftest import EXAMPLES, write_jsonl
from .conftest import DATA

PREDICTIONS = str(EXAMPLES / "predictions.jsonl")


def _unpacked(path: Path) -> str:
    data = path.read_bytes()
    assert data[:2] == b"\x1f\x8b", f"{path.name} is not gzip"
    return gzip.decompress(data).decode("utf-8")


def _json(path: Path) -> None:
    assert isinstance(json.loads(_unpacked(path)), dict)


def _decisions(tmp: Path) -> str:
    return str(write_jsonl(tmp / "decisions.jsonl", [
        {"dialogue_id": "EX001.json", "turn_index": 1, "decision": "incorrect"}]))


def _corrections(tmp: Path) -> str:
    return str(write_jsonl(tmp / "corrections.jsonl", [
        {"dialogue_id": "EX001.json", "turn_index": 0, "slot": "hotel-area", "value": "east",
         "gold": "2.1", "reviewer": "ann", "time": "2026-11-28T10:00:00Z"}]))


def _reviewed_sheet(runs: dict[str, Path], tmp: Path) -> str:
    """The good run's candidates as a review sheet, its first candidate accepted."""
    sheet = tmp / "sheet.jsonl"
    assert main(["audit", str(runs["good"]), "--candidates", str(sheet)]) == 0
    records = [json.loads(line) for line in sheet.read_text().splitlines()]
    records[0]["decision"] = "accept"
    return str(write_jsonl(tmp / "reviewed.jsonl", records))


def _dialogues_back(path: Path) -> None:
    _unpacked(path)
    assert len(load_dialogues(path).dialogues) == len(load_dialogues(
        EXAMPLES / "dialogues.jsonl").dialogues)


# (command, option): (arguments before the option given the runs and a scratch folder,
# the output's name, a check of the written file)
Case = tuple[Callable[[dict[str, Path], Path], list[str]], str, Callable[[Path], None]]
CASES: dict[tuple[str, str], Case] = {
    ("metrics", "--json"): (
        lambda runs, tmp: ["metrics", *DATA, "--predictions", PREDICTIONS],
        "metrics.json.gz", _json),
    ("report", "--table-out"): (
        lambda runs, tmp: ["report", *DATA, "--predictions", PREDICTIONS],
        "table.csv.gz", lambda p: _unpacked(p).startswith("system,gold,")),
    ("agreement", "--json"): (
        lambda runs, tmp: ["agreement", str(runs["good"]), "--n-boot", "20"],
        "agreement.json.gz", _json),
    ("compare", "--json"): (
        lambda runs, tmp: ["compare", str(runs["good"]), str(runs["weak"])],
        "compare.json.gz", _json),
    ("systems", "--json"): (
        lambda runs, tmp: ["systems", str(runs["good"]), str(runs["weak"])],
        "systems.json.gz", _json),
    ("systems", "--png"): (
        lambda runs, tmp: ["systems", str(runs["good"]), str(runs["weak"])],
        "systems.png.gz",
        lambda p: gzip.decompress(p.read_bytes()).startswith(b"\x89PNG")),
    ("audit", "--out"): (
        lambda runs, tmp: ["audit", str(runs["good"])],
        "audit.html.gz", lambda p: _unpacked(p).lstrip().lower().startswith("<!doctype html")),
    ("audit", "--candidates"): (
        lambda runs, tmp: ["audit", str(runs["good"])],
        "candidates.csv.gz", lambda p: _unpacked(p).splitlines()[0].count(",") > 3),
    ("corrections apply", "--out"): (
        lambda runs, tmp: ["corrections", "apply", "--dialogues",
                           str(EXAMPLES / "dialogues.jsonl"), "--gold", "2.1",
                           "--corrections", _corrections(tmp), "--as", "21fix"],
        "fixed.jsonl.gz", _dialogues_back),
    ("corrections from-candidates", "--out"): (
        lambda runs, tmp: ["corrections", "from-candidates", _reviewed_sheet(runs, tmp),
                           "--reviewer", "ann"],
        "corrections.jsonl.gz",
        lambda p: json.loads(_unpacked(p).splitlines()[0])["reviewer"] == "ann"),
    ("labels import", "--out"): (
        lambda runs, tmp: ["labels", "import", _decisions(tmp), "--annotator", "ann"],
        "labels.jsonl.gz",
        lambda p: json.loads(_unpacked(p).splitlines()[0])["label"] == 0),
    ("labels sample", "--out"): (
        lambda runs, tmp: ["labels", "sample", str(runs["good"]), "--n", "3"],
        "sample.jsonl.gz", lambda p: _unpacked(p) and len(load_sample(p).turns) == 3),
    ("labels plan", "--json"): (
        lambda runs, tmp: ["labels", "plan", str(runs["good"]), "--width", "30",
                           "--disagreement", "0.1"],
        "plan.json.gz", _json),
    **{("leaderboard", flag): (
        lambda runs, tmp: ["leaderboard", *DATA, PREDICTIONS,
                           str(EXAMPLES / "predictions-weak.jsonl"), "--gold", "2.4"],
        name, check)
       for flag, name, check in (
           ("--json", "board.json.gz",
            lambda p: bool(json.loads(_unpacked(p))["systems"][0]["metrics"])),
           ("--csv", "board.csv.gz", lambda p: _unpacked(p).splitlines()[0].count(",") > 3),
           ("--markdown", "board.md.gz", lambda p: "|" in _unpacked(p)),
           ("--latex", "board.tex.gz", lambda p: "\\toprule" in _unpacked(p)),
           ("--png", "forest.png.gz", lambda p: gzip.decompress(p.read_bytes())[:4]
            == b"\x89PNG"),
           ("--svg", "forest.svg.gz", lambda p: "<svg" in _unpacked(p)),
           ("--turns", "turns.jsonl.gz",
            lambda p: bool(json.loads(_unpacked(p).splitlines()[0])["dialogue_id"])))},
    ("convert", "--out"): (
        lambda runs, tmp: ["convert", str(EXAMPLES / "dialogues.jsonl")],
        "dialogues.jsonl.gz", _dialogues_back),
}

ELSEWHERE = {
    ("evaluate", "--out"): "a directory",
    ("batch collect", "--out"): "a directory",
    ("results", "--out"): "a directory",
    ("results", "--export"): "the job's bundle, a .tar.gz from the server, written as it comes",
    ("batch prepare", "--out"): "refused: the Batch API reads plain JSON Lines "
                                "(test_batch_prepare_refuses_a_gzip_name)",
    ("corrections export", "--out"): "needs a server: tests/web/test_web_corrections.py",
}
"""Output options this file does not write through, and why."""

OUTPUT_FLAGS = ("--out", "--json", "--png", "--svg", "--csv", "--markdown", "--latex", "--turns",
                "--table-out", "--candidates", "--export")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
        else:
            yield path, action


def test_every_output_option_of_the_command_line_is_covered():
    found = {(" ".join(path), flag) for path, action in _commands(build_parser())
             for flag in action.option_strings
             if flag in OUTPUT_FLAGS and action.nargs != 0}
    assert found == set(CASES) | set(ELSEWHERE)


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: f"{c[0]} {c[1]}")
def test_a_gz_name_is_written_as_gzip(case, runs, tmp_path):
    argv, name, check = CASES[case]
    out = tmp_path / name
    assert main([*argv(runs, tmp_path), case[1], str(out)]) == 0
    assert check(out) is not False


def test_batch_prepare_refuses_a_gzip_name(tmp_path, capsys):
    out = tmp_path / "requests.jsonl.gz"
    code = main(["batch", "prepare", *DATA, "--predictions", PREDICTIONS, "--model", "m",
                 "--out", str(out)])
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "plain JSON Lines" in err and "Traceback" not in err
