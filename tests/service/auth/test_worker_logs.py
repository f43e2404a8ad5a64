"""Every process that logs blanks secrets, not only ``dst-judge serve``'s (issue 36): the
``dst-judge worker`` supervisor's lines and its worker processes' (both set up by
:func:`log_to_stderr`), tracebacks included."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.service.serve_process import WorkerCommand

TOKEN = "dsj_Aa1Bb2Cc3Dd4Ee5"
KEY = "sk-Zz9Yy8Xx7Ww6Vv5"

pytestmark = pytest.mark.servers


@pytest.mark.timeout(120)
def test_a_worker_commands_log_lines_lose_token_and_key_shaped_secrets(tmp_path: Path) -> None:
    """Its "queue in ..." line names the database's file (not its folder): a file named like
    a token shows blanked, and the folder shows not at all."""
    folder = tmp_path / "server-side-folder"
    folder.mkdir(parents=True)
    with WorkerCommand(tmp_path / "data", db=f"sqlite:///{folder / (TOKEN + '.db')}",
                       max_seconds=30) as worker:
        deadline = time.monotonic() + 60
        while "queue in" not in worker.text():
            assert worker.process is not None and worker.process.poll() is None, worker.text()
            assert time.monotonic() < deadline, worker.text()
            time.sleep(0.2)
        worker.stop(timeout=30)
    text = worker.text()
    assert "queue in SQLite file dsj_[redacted]" in text, text
    assert TOKEN[4:] not in text and "server-side-folder" not in text, text
    assert str(tmp_path) not in text, text


def test_log_to_stderr_blanks_secrets_in_messages_and_tracebacks() -> None:
    """What a worker process runs first: a secret in an exception's message (an endpoint's
    error quoting its key) is blanked in the traceback too."""
    code = (
        "import logging\n"
        "from judge.service.auth._logs import log_to_stderr\n"
        "log_to_stderr('info')\n"
        "try:\n"
        f"    raise ValueError('refused key {KEY}')\n"
        "except ValueError:\n"
        f"    logging.getLogger('dst_judge.service').exception('job failed for %s', '{TOKEN}')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert "job failed for dsj_[redacted]" in done.stderr, done.stderr
    assert "refused key sk-[redacted]" in done.stderr, done.stderr
    assert TOKEN[4:] not in done.stderr and KEY[3:] not in done.stderr, done.stderr
