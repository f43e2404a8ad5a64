"""The tests' network guard: only loopback connections, so model traffic comes from cassettes
or from local fake servers, never from the network.

``tests/conftest.py`` installs it in the pytest process. Python subprocesses that tests start
(``dst-judge serve``, CLI runs) get it too: this folder is on their ``PYTHONPATH`` (see
:func:`subprocess_pythonpath`), and Python imports a ``sitecustomize`` module at start-up. A
subprocess writes each host it was refused to the file named by ``DST_JUDGE_TEST_NETLOG``;
the test session reads that file at its end, so a subprocess that tried to reach
api.openai.com past the cassettes fails the run as the pytest process would.

The same start-up hook simulates a smaller installation: the top-level modules named in
``DST_JUDGE_TEST_UNIMPORTABLE`` cannot be imported (see ``tests/minimal_env.py``)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "::1", "localhost")
LOG_VARIABLE = "DST_JUDGE_TEST_NETLOG"
FOLDER = Path(__file__).resolve().parent


class NetworkBlocked(OSError):
    """A test tried to open a connection beyond the loopback interface."""


def subprocess_pythonpath(*roots: str | Path) -> str:
    """``PYTHONPATH`` for a Python subprocess of a test: ``roots`` first, then this folder (so
    the subprocess runs under the guard)."""
    return os.pathsep.join([*(str(r) for r in roots), str(FOLDER)])


def guarded_socket(refused: Callable[[str], None]) -> dict[str, Any]:
    """Loopback-only stand-ins for ``socket.socket.connect``, ``connect_ex`` and
    ``socket.getaddrinfo``: any other host is passed to ``refused`` and raises
    :class:`NetworkBlocked` (httpx and aiohttp both go through these)."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(address: object) -> None:
        if isinstance(address, (str, bytes)):  # AF_UNIX socket paths
            return
        host = address[0] if isinstance(address, tuple) else None
        if host not in LOOPBACK:
            refused(str(host))
            raise NetworkBlocked(f"tests never reach the network: connection to {address!r} "
                                 "refused (replay it from cassettes/ or use a local server)")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in LOOPBACK:
            refused(name)
            raise NetworkBlocked(f"tests never reach the network: lookup of {name!r} refused "
                                 "(replay it from cassettes/ or use a local server)")
        return real_getaddrinfo(host, *args, **kwargs)

    return {"connect": connect, "connect_ex": connect_ex, "getaddrinfo": getaddrinfo}


def _install_in_subprocess(log: str) -> None:
    def refused(host: str) -> None:
        line = f"{host}\t{' '.join(sys.argv)[:300]}\n"
        try:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError:
            pass

    stand_ins = guarded_socket(refused)
    socket.socket.connect = stand_ins["connect"]  # type: ignore[method-assign]
    socket.socket.connect_ex = stand_ins["connect_ex"]  # type: ignore[method-assign]
    socket.getaddrinfo = stand_ins["getaddrinfo"]


class Unimportable:
    """A finder, first on ``sys.meta_path``, for which the named top-level modules are not
    installed (``tests/minimal_env.py`` names the packages of the extras a user lacks)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


if __name__ == "sitecustomize" and os.environ.get(LOG_VARIABLE):
    _install_in_subprocess(os.environ[LOG_VARIABLE])
if __name__ == "sitecustomize" and os.environ.get("DST_JUDGE_TEST_UNIMPORTABLE"):
    sys.meta_path.insert(0, Unimportable(set(
        os.environ["DST_JUDGE_TEST_UNIMPORTABLE"].split(","))))
