"""``dst-judge submit leaderboard`` against a served process: the systems given as files are
uploaded, a run is named by its job id, and the result is the library's leaderboard JSON."""

from __future__ import annotations

import pytest

import judge
from tests.conftest import EXAMPLES
from tests.service.serve_process import ServeProcess, cli, create_token

from .test_service_leaderboard import _comparable, _library

pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]


def test_submit_leaderboard_gives_the_library_json(tmp_path):
    data = tmp_path / "server"
    token = create_token(data, "lab")
    with ServeProcess(data) as server:
        env = {"DST_JUDGE_TOKEN": token, "DST_JUDGE_SERVER": server.url}
        done = cli("submit", "leaderboard", "--systems", str(EXAMPLES / "predictions.jsonl"),
                   str(EXAMPLES / "predictions-weak.jsonl"), "--schema",
                   str(EXAMPLES / "schema.json"), "--dialogues",
                   str(EXAMPLES / "dialogues.jsonl"), "-o", 'gold=["2.1", "2.4"]',
                   "-o", 'names=["strong", "weak"]', "--wait", env=env, check=False)
        assert "succeeded (exit 0" in done.stdout, done.stdout + done.stderr + server.errors()
        job_id = done.stdout.split()[1]
        board = judge.Client(server.url, token).results(job_id)
        assert _comparable(board) == _comparable(_library(["2.1", "2.4"], ["strong", "weak"]))
        refused = cli("submit", "leaderboard", "--systems", str(EXAMPLES / "predictions.jsonl"),
                      "--schema", str(EXAMPLES / "schema.json"), "--dialogues",
                      str(EXAMPLES / "dialogues.jsonl"), env=env, check=False)
        assert refused.returncode == 2 and "inputs.systems" in refused.stderr, refused.stderr
