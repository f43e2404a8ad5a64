"""The exit status table (docs/judge.md, "Exit status"): one test per meaning, against the fault
server, a closed port and cassettes; and the documented table lists exactly the codes of
:class:`judge.errors.ExitStatus`."""

from __future__ import annotations

import json
import re
import socket

import pytest

from judge.cli import main
from judge.errors import ExitStatus
from judge.pipeline import RunDirectory

from ..conftest import CASSETTES, EXAMPLES, ROOT
from ..fault_server import FaultConfig, FaultServer

DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--predictions", str(EXAMPLES / "predictions.jsonl"),
        "--model", "m", "--no-progress", "--no-cache", "--max-retries", "0"]


def _run(tmp_path, url, *extra):
    return main(["evaluate", *DATA, "--base-url", url, "--out", str(tmp_path / "run"), *extra])


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_0_every_turn_judged(tmp_path):
    assert main(["evaluate", *DATA, "--replay", str(CASSETTES / "example-two-dim.json"),
                 "--model", "local", "--out", str(tmp_path / "run")]) == ExitStatus.OK == 0


def test_1_finished_with_some_error_rows(tmp_path, capsys):
    with FaultServer(FaultConfig(rates={"http_500": 0.3}, transient_attempts=9, seed=5)) as s:
        assert _run(tmp_path, s.url) == ExitStatus.ERROR_ROWS == 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert 0 < summary["error_turns"] < summary["turns"]
    assert "retry-errors" in capsys.readouterr().err


def test_2_bad_input(tmp_path, capsys):
    code = main(["evaluate", *DATA[:2], "--dialogues", str(tmp_path / "missing.jsonl"),
                 *DATA[4:], "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r")])
    assert code == ExitStatus.BAD_INPUT == 2
    assert "missing.jsonl: file not found" in capsys.readouterr().err


def test_3_budget_reached(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"batch_discount": 0.5, "models": {
        "m": {"input": 1e6, "cached_input": 1e6, "output": 1e6}}}))
    with FaultServer(FaultConfig()) as server:
        code = _run(tmp_path, server.url, "--budget", "1", "--prices", str(prices),
                    "--concurrency", "1")
    assert code == ExitStatus.BUDGET_REACHED == 3


def test_4_nothing_judged_on_a_closed_port(tmp_path, capsys):
    assert _run(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1") == 4
    err = capsys.readouterr().err
    assert "nothing could be judged" in err and "connection error" in err


def test_4_nothing_judged_when_every_call_fails(tmp_path):
    with FaultServer(FaultConfig(rates={"http_500": 1.0}, transient_attempts=99)) as server:
        assert _run(tmp_path, server.url) == ExitStatus.NOTHING_JUDGED == 4
        assert server.snapshot()["completed"] == 0


@pytest.mark.parametrize("status", [401, 403, 404])
def test_5_authentication_or_unknown_model(tmp_path, status, capsys):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Refusing(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["content-length"]))
            body = json.dumps({"error": {"message": f"refused ({status})"}}).encode()
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = _run(tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v1")
    finally:
        server.shutdown()
        server.server_close()
    assert code == ExitStatus.AUTH_OR_MODEL == 5
    assert f"HTTP {status}: refused" in capsys.readouterr().err


def test_6_run_directory_locked(tmp_path):
    holder = RunDirectory(tmp_path / "run")
    holder.lock()
    try:
        assert _run(tmp_path, "http://127.0.0.1:9/v1") == ExitStatus.RUN_DIRECTORY == 6
    finally:
        holder.unlock()


def test_the_readme_table_lists_every_exit_status():
    page = (ROOT / "docs" / "judge.md").read_text(encoding="utf-8")
    section = page.split("## Exit status", 1)[1].split("\n#", 1)[0]
    codes = {int(m) for m in re.findall(r"^\| `?(\d+)`? \|", section, flags=re.M)}
    assert codes == {int(s) for s in ExitStatus} | {143}
