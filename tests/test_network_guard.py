"""The tests' network guard reaches Python subprocesses too (tests/netguard): a CLI run in a
subprocess that points at a remote host is refused at connect time, and the refusal is logged
for the session, which fails the run when the host is api.openai.com."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.netguard.sitecustomize import LOG_VARIABLE


def test_a_subprocess_cannot_reach_past_the_loopback(tmp_path):
    log = Path(os.environ[LOG_VARIABLE])
    before = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    done = subprocess.run(
        [sys.executable, "-m", "judge", "evaluate", "--schema", str(EXAMPLES / "schema.json"),
         "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
         "--predictions", str(EXAMPLES / "predictions.jsonl"), "--model", "m",
         "--base-url", "https://judge.example.test/v1", "--no-cache", "--max-retries", "0",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 0  # every call failed: no verdicts
    after = log.read_text(encoding="utf-8").splitlines()
    refused = [line.split("\t") for line in after[len(before):]]
    assert refused, done.stderr
    assert {host for host, _ in refused} == {"judge.example.test"}
    assert all("judge" in argv and "evaluate" in argv for _, argv in refused)
