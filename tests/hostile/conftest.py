"""Shared pieces of the hostile-input corpus: a canary API key, a one-turn data set, a CLI
runner that turns any traceback into a failure, and the checks every case ends with.

Every case of the corpus must end with: no traceback, an exit status that is not 0 when
something was wrong, a message naming the file (and line and field where there are some) for
bad files, and the canary key in no output and no file written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import judge.model._client as client_module
from judge.cli import main

from ..conftest import EXAMPLES
from ..fault_server import FaultServer

CANARY = "sk-canary-dstjudge-0d15ea5e7c0ffee4b1d5e3a2c9f8e7d6a5b4"
"""The API key of every case: it must appear in no output and no file."""
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")

SCHEMA = EXAMPLES / "schema.json"
DIALOGUE = {"dialogue_id": "H1", "turns": [
    {"turn_index": 0, "system": "", "user": "i need a cheap place to stay in the north .",
     "gold_state_21": {"hotel-area": "north", "hotel-pricerange": "cheap"},
     "gold_state_24": {"hotel-area": "north", "hotel-pricerange": "cheap"}}]}
PREDICTION = {"dialogue_id": "H1", "system_name": "hostile-dst", "turns": [
    {"turn_index": 0, "pred_state": {"hotel-area": "north", "hotel-pricerange": "cheap"}}]}


@dataclass
class Outcome:
    """What one command did."""

    code: int
    out: str
    err: str


def jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@dataclass
class Data:
    schema: Path
    dialogues: Path
    predictions: Path

    def args(self) -> list[str]:
        return ["--schema", str(self.schema), "--dialogues", str(self.dialogues),
                "--predictions", str(self.predictions)]


@pytest.fixture
def data(tmp_path: Path) -> Data:
    """One dialogue of one turn: two judge calls (accuracy and completeness)."""
    return Data(SCHEMA, jsonl(tmp_path / "in" / "dialogues.jsonl", [DIALOGUE]),
                jsonl(tmp_path / "in" / "predictions.jsonl", [PREDICTION]))


@pytest.fixture(autouse=True)
def canary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The canary key for every case, every default location inside the case's directory
    (so that the check sees every file written), no proxies between the client and
    127.0.0.1, and a tiny retry backoff."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("DST_JUDGE_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    for name in ("DST_JUDGE_API_KEY", "OPENAI_BASE_URL", "DST_JUDGE_BASE_URL", "HTTP_PROXY",
                 "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(client_module, "BACKOFF_INITIAL", 0.001)
    return CANARY


@pytest.fixture(scope="session")
def _hostile_server_of_the_session() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def hostile_server(_hostile_server_of_the_session: FaultServer) -> FaultServer:
    """One fake OpenAI-compatible server for the whole corpus (per xdist worker); the
    catalogue entry is chosen by the base URL (``/hostile/<kind>/v1``). Each test starts with
    its counts, Batch API files and batches empty: which tests ran before on the same worker
    differs from run to run (a batch of another test with the same file digest would be
    found as this test's lost batch)."""
    server = _hostile_server_of_the_session
    server.stats.reset()
    server.running.files.clear()
    server.running.batches.clear()
    return server


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run ``dst-judge`` in this process: any exception escaping ``main`` fails the test (a
    user would have seen a traceback); the output is returned for the checks."""

    def run(*argv: str) -> Outcome:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse: usage errors exit 2 with a message
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


def files_with(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` holding ``needle`` (bytes, so binary files count too)."""
    raw = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and raw in p.read_bytes()]


def check_clean(outcome: Outcome, root: Path) -> None:
    """The checks of every case: no traceback, the canary nowhere, no terminal controls."""
    for stream in (outcome.out, outcome.err):
        assert "Traceback" not in stream
        assert CANARY not in stream
        assert not _TERMINAL_CONTROLS.search(stream.replace("\n", "").replace("\t", "")), \
            f"terminal control characters in the output: {stream!r}"
    assert files_with(root, CANARY) == []


def check_bad_input(outcome: Outcome, root: Path, *, names: Path | str | None = None,
                    line: int | None = None, field: str | None = None,
                    codes: tuple[int, ...] = (2,)) -> None:
    """A refused input: the expected exit status, one clean message, naming what it should."""
    check_clean(outcome, root)
    assert outcome.code in codes, (outcome.code, outcome.err)
    assert "error:" in outcome.err or "problem" in outcome.err, outcome.err
    if names is not None:
        assert str(names) in outcome.err, outcome.err
    if line is not None:
        assert f":{line}" in outcome.err, outcome.err
    if field is not None:
        assert field in outcome.err, outcome.err
