"""``dst-judge local ...`` against the fake server (judge/cli/_local.py; kept with the local
tests because it needs their fake model and cache)."""

from __future__ import annotations

import argparse
import io

import pytest
from rich.console import Console

from judge.cli._local import add_local_parser
from judge.errors import OptionError
from judge.model.local import _registry as registry
from judge.model.local import local_base_url


def _cli(argv: list[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="dst-judge")
    add_local_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code = args.handler(args, Console(file=out, width=300))
    return code, out.getvalue()


def test_cli_serve_status_stop(server_cache, monkeypatch):
    monkeypatch.setattr(registry, "default_cache_dir", lambda: server_cache)
    code, out = _cli(["local", "serve", "--model", "fake", "--parallel", "1"])
    try:
        assert code == 0
        url = out.strip().splitlines()[-1]
        assert url == local_base_url(server_cache)
        code, out = _cli(["local", "status"])
        assert code == 0 and "server: running" in out and "fake.gguf" in out
    finally:
        code, out = _cli(["local", "stop"])
    assert code == 0 and "stopped llama-server" in out
    assert "no local server is running" in _cli(["local", "status"])[1]


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "70000"], ["--parallel", "0"],
                                  ["--wait", "-1"]])
def test_cli_rejects_bad_serve_options(argv, tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "default_cache_dir", lambda: tmp_path)
    with pytest.raises(OptionError):
        _cli(["local", "serve", *argv])


def test_cli_parser_choices():
    with pytest.raises(SystemExit):
        _cli(["local", "setup", "--model", "7b"])
    with pytest.raises(SystemExit):
        _cli(["local"])


def test_cli_setup_reports_progress_when_stderr_is_not_a_terminal(monkeypatch):
    """Redirected to a file or a CI log, ``local setup`` still prints its heartbeat lines: a
    download and a build of several silent minutes otherwise look like a hang."""
    import judge.model.local

    seen: dict[str, object] = {}

    def fake_setup(model, *, portable, console, progress):
        seen.update(console=console, progress=progress)
        raise OptionError("stop here")

    # the command imports its stage when it runs
    monkeypatch.setattr(judge.model.local, "setup", fake_setup)
    with pytest.raises(OptionError):
        _cli(["local", "setup"])
    assert seen["progress"] is True and not seen["console"].is_terminal
