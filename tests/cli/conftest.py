"""Fixtures of the CLI tests: the example judged for two systems, replayed from cassettes."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.cli import main

from ..conftest import CASSETTES, EXAMPLES

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl")]


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two systems judged on the example dialogues, replayed from cassettes: ``good`` and
    ``weak`` run directories. Once per session (per xdist worker): tests read them, and copy
    them before changing anything."""
    folder = tmp_path_factory.mktemp("example-runs")
    out = {}
    for name, predictions, cassette in (
            ("good", "predictions.jsonl", "example-two-dim.json"),
            ("weak", "predictions-weak.jsonl", "example-weak-two-dim.json")):
        out[name] = folder / name
        assert main(["evaluate", *DATA, "--predictions", str(EXAMPLES / predictions),
                     "--model", "local", "--replay", str(CASSETTES / cassette), "--cache-dir",
                     str(folder / f"c-{name}"), "--out", str(out[name])]) == 0
    return out
