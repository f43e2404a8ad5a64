"""Serving: the detached server, its state file, health waiting, and a stop that never
signals a process that is not our llama-server."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from judge._errors import LocalServerError, LocalSetupError
from judge.model.local import local_base_url, model_file, serve, server_binary, status, stop
from judge.model.local._process import alive, is_llama_server
from judge.model.local._registry import state_file

from ._fakes import servers_using


def test_serve_health_state_and_stop(server_cache):
    info = serve("fake", cache_dir=server_cache, wait=20, parallel=3, ctx=1024, threads=1)
    try:
        assert info.base_url == f"http://127.0.0.1:{info.port}/v1"
        state = json.loads(state_file(server_cache).read_text())
        assert {k: state[k] for k in ("pid", "port", "base_url", "model")} == {
            "pid": info.pid, "port": info.port, "base_url": info.base_url, "model": "fake"}
        assert state["started"]
        argv = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
        for flag, value in [(b"--alias", b"local"), (b"--host", b"127.0.0.1"),
                            (b"--port", str(info.port).encode()), (b"-c", b"1024"),
                            (b"-t", b"1"), (b"-np", b"3")]:
            assert argv[argv.index(flag) + 1] == value
        assert argv[argv.index(b"-m") + 1] == str(model_file("fake", server_cache)).encode()
        assert os.getsid(info.pid) == info.pid  # own session: outlives the starting command
        with httpx.Client(trust_env=False) as client:
            assert client.get(f"http://127.0.0.1:{info.port}/health").json() == {"status": "ok"}
        assert local_base_url(server_cache) == info.base_url
        assert status(cache_dir=server_cache).state == "running"
        from judge.cli._local import local_config_values
        assert local_config_values(server_cache) == {
            "base_url": info.base_url, "model": "local", "prompt_variant": "few-shot",
            "timeout": 900.0, "max_retries": 1}
        with pytest.raises(LocalServerError, match="already running"):
            serve("fake", cache_dir=server_cache, wait=5)
        assert "fake llama-server" in (server_cache / "server.log").read_text()
    finally:
        message = stop(cache_dir=server_cache)
    assert message.startswith("stopped llama-server pid")
    assert not alive(info.pid)
    assert not state_file(server_cache).exists()
    assert local_base_url(server_cache) is None
    assert stop(cache_dir=server_cache) == "no local server is running"


def test_stop_escalates_to_sigkill(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "stubborn")
    info = serve("fake", cache_dir=server_cache, wait=20)
    message = stop(cache_dir=server_cache, timeout=0.5)
    assert message.startswith("killed") and str(info.pid) in message
    assert not alive(info.pid)


def test_serve_reports_a_dying_server_with_its_log(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "die")
    with pytest.raises(LocalServerError, match="exited with code 1") as err:
        serve("fake", cache_dir=server_cache, wait=20)
    assert "failed to load model" in str(err.value)
    assert not state_file(server_cache).exists()


def test_serve_gives_up_after_wait_and_stops_the_process(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "loading")
    with pytest.raises(LocalServerError, match=r"did not become healthy within 1\.5 s"):
        serve("fake", cache_dir=server_cache, wait=1.5)
    assert not state_file(server_cache).exists()
    assert servers_using(server_cache) == []


def test_serve_refuses_a_busy_port(server_cache):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(LocalServerError, match="already in use"):
            serve("fake", cache_dir=server_cache, port=busy.getsockname()[1])


def test_serve_needs_setup(tmp_path, fake_local_model, server_cache):
    with pytest.raises(LocalSetupError, match="dst-judge local setup --model fake"):
        serve("fake", cache_dir=tmp_path / "empty")
    server_binary(server_cache).unlink()
    with pytest.raises(LocalSetupError, match="llama-server is not built"):
        serve("fake", cache_dir=server_cache)


def test_refuses_to_stop_a_pid_that_is_not_llama_server(server_cache):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.1)
        state_file(server_cache).write_text(json.dumps(
            {"pid": other.pid, "port": 1, "base_url": "http://127.0.0.1:1/v1"}))
        with pytest.raises(LocalServerError, match=f"refusing to stop pid {other.pid}"):
            stop(cache_dir=server_cache)
        assert other.poll() is None  # still running: nothing was signalled
        assert status(cache_dir=server_cache).state == "stale"
        assert local_base_url(server_cache) is None
    finally:
        other.kill()
        other.wait()


def test_a_llama_server_on_another_port_is_not_ours(server_cache):
    info = serve("fake", cache_dir=server_cache, wait=20)
    try:
        assert is_llama_server(info.pid)
        assert is_llama_server(info.pid, info.port)
        assert not is_llama_server(info.pid, info.port + 1)
        assert not is_llama_server(os.getpid())
    finally:
        stop(cache_dir=server_cache)


def test_stale_state_is_cleaned_up(server_cache):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = state_file(server_cache)
    path.write_text(json.dumps({"pid": dead.pid, "port": 9, "host": "127.0.0.1",
                                "base_url": "http://127.0.0.1:9/v1", "model": "fake"}))
    assert status(cache_dir=server_cache).state == "stale"
    message = stop(cache_dir=server_cache)
    assert message == f"removed stale {path}: pid {dead.pid} is not running"
    assert not path.exists()
    path.write_text("{not json")
    assert "unreadable" in stop(cache_dir=server_cache)
    assert not path.exists()


def test_serve_replaces_a_stale_state_file(server_cache):
    path = state_file(server_cache)
    path.write_text(json.dumps({"pid": 2 ** 22 + 7, "port": 9, "host": "127.0.0.1",
                                "base_url": "http://127.0.0.1:9/v1", "model": "fake"}))
    out = io.StringIO()
    info = serve("fake", cache_dir=server_cache, wait=20, console=Console(file=out))
    try:
        assert "removing stale" in out.getvalue()
        assert json.loads(path.read_text())["pid"] == info.pid
    finally:
        stop(cache_dir=server_cache)
