"""Which process is which: liveness, command lines and signalling, without trusting a PID.

A PID recorded in ``server.json`` may have died and been reused by an unrelated process, so
nothing is signalled until its command line shows it is still a llama-server on our port.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""Servers started by this process, kept so they can be reaped (no zombies, no ResourceWarning)."""


def cmdline(pid: int) -> list[str] | None:
    """argv of a process (None when unknown): /proc where it exists, else ``ps``."""
    proc = Path(f"/proc/{pid}/cmdline")
    if Path("/proc/self").exists():
        try:
            raw = proc.read_bytes()
        except OSError:
            return None
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or None
    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                             text=True, check=False).stdout.strip()
    except OSError:
        return None
    return out.split() or None


def alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie counts as dead: it cannot serve anything)."""
    if pid <= 0:
        return False
    child = CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        CHILDREN.pop(pid, None)  # reaped
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state not in (["Z"], ["X"])


def is_llama_server(pid: int, port: int | None = None) -> bool:
    """Whether ``pid`` is a llama-server (and listens on ``port`` per its command line).

    The port check guards against a recycled PID now belonging to a *different* llama-server.
    """
    argv = cmdline(pid)
    if not argv:
        return False
    if not any(Path(a).name == "llama-server" for a in argv[:2]):
        return False
    if port is None:
        return True
    return any(a == "--port" and b == str(port) for a, b in itertools.pairwise(argv))


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def terminate(pid: int, timeout: float) -> bool:
    """SIGTERM, then SIGKILL after ``timeout``; True when SIGKILL was needed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 5.0)
    return True
