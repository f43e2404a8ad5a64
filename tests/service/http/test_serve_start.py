"""How ``dst-judge serve`` starts: it binds its port before it announces anything, so a port in
use is one clear line and exit 2, never an address printed, a "startup complete" logged and
then a traceback."""

from __future__ import annotations

import socket

import pytest

from judge.errors import OptionError
from judge.service import listening_socket
from tests.service.serve_process import ServeProcess, cli

# one server process and one that must not start: longer than the suite's 60 s, still finite
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]


def test_a_port_in_use_is_refused_before_anything_is_announced(tmp_path):
    with ServeProcess(tmp_path / "first") as server:
        done = cli("serve", "--port", str(server.port), "--data-dir", str(tmp_path / "second"),
                   "--max-seconds", "30", check=False, timeout=90)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"cannot listen on 127.0.0.1:{server.port}: the port is in use" in done.stderr, output
    assert "Traceback" not in output
    # nothing was announced: no address, no startup
    assert "dst-judge serve on http" not in output and "startup complete" not in output.lower()


def test_the_socket_is_bound_and_listening_before_the_app_starts():
    sock = listening_socket("127.0.0.1", 0)
    try:
        host, port = sock.getsockname()[:2]
        with socket.create_connection((host, port), timeout=5):
            pass  # accepted by the backlog: it listens already
        with pytest.raises(OptionError, match="the port is in use"):
            listening_socket("127.0.0.1", port)
    finally:
        sock.close()
