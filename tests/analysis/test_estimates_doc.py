"""docs/ESTIMATES.md's worked example runs from the project's own files (examples/ and
cassettes/), and prints the figures the page shows."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from judge.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ESTIMATES.md"


def worked_example() -> list[tuple[str, str, str]]:
    """The code blocks of the worked example: (language, target, body) in page order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Worked example"):]
    return [(m.group(1), m.group(2).strip(), m.group(3))
            for m in re.finditer(r"```(\w*)([^\n]*)\n(.*?)```", section, flags=re.S)]


def test_the_worked_example_runs_and_matches_the_page(tmp_path, monkeypatch, capsys):
    for name in ("examples", "cassettes"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    blocks = worked_example()
    commands = 0
    for language, target, body in blocks:
        if language == "sh":
            for line in body.splitlines():
                if line.strip():
                    argv = shlex.split(line)
                    assert argv[0] == "dst-judge"
                    assert main(argv[1:]) == 0, line
                    commands += 1
        elif language == "jsonl":
            (tmp_path / target).write_text(body, encoding="utf-8")
    assert commands == 4
    out = " ".join(capsys.readouterr().out.split())
    assert "1 labelled turn(s) are not in the sample file" in out
    tsa = json.loads((tmp_path / "runs" / "agreement.json").read_text())[
        "population"]["estimates"]["tsa"]
    table = next(body for language, _, body in blocks
                 if language == "" and "estimate" in body)
    for name in ("judge", "labels", "ppi"):
        line = next(row for row in table.splitlines() if row.split()[1:2] == [name])
        figures = [float(x) for x in re.findall(r"-?\d+\.\d+", line)]
        assert figures[0] == pytest.approx(tsa[name]["value"], abs=0.05)
        if tsa[name]["ci"] is not None:
            assert figures[1:3] == pytest.approx(tsa[name]["ci"], abs=0.05)
    assert tsa["judge"]["ci"] is None
