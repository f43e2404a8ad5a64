"""Progress of the slow steps of ``local setup`` (pip downloads, the cmake build), shown at
least every few seconds whatever the step prints.

A terminal bar fed by the tool's own output stands still for minutes when the tool says nothing
(pip resolving 22 wheels, the compiler on one large file of ggml) and shows nothing at all in a
log or a CI job, where rich draws no live bar. So each slow step also runs a
:class:`Heartbeat`: a thread that prints one plain line every :data:`HEARTBEAT_SECONDS` with
what the step last reported and how long it has run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO

from rich.console import Console

PIP: tuple[str, ...] = (sys.executable, "-m", "pip")
"""How ``local setup`` runs pip (a test puts a fake in its place)."""

HEARTBEAT_SECONDS = 5.0
"""Seconds between two progress lines: half the 10 s a user may wait without a word, so a
loaded machine that wakes the thread late still keeps the promise."""


def elapsed(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``."""
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class Heartbeat:
    """Prints ``<what>: <status> (<elapsed>)`` every ``interval`` seconds until stopped.

    ``emit`` receives each line (default: print it on ``console``); with neither, nothing is
    printed, as for ``progress=False``. :meth:`update` sets the status from any thread.
    """

    def __init__(self, what: str, console: Console | None, *,
                 interval: float | None = None,
                 emit: Callable[[str], None] | None = None) -> None:
        self.what = what
        self.interval = HEARTBEAT_SECONDS if interval is None else interval
        self.status = "starting"
        self._emit = emit or ((lambda line: console.print(line, highlight=False, markup=False))
                              if console is not None else None)
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, status: str) -> None:
        self.status = status

    def line(self) -> str:
        return f"{self.what}: {self.status} ({elapsed(time.monotonic() - self._started)})"

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            if self._emit is not None:
                self._emit(self.line())

    def __enter__(self) -> Heartbeat:
        self._started = time.monotonic()
        if self._emit is not None:
            self._thread = threading.Thread(target=self._beat, name="setup-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def run_streamed(cmd: Sequence[str], on_line: Callable[[str], None] | None = None, *,
                 log: IO[str] | None = None, keep: int = 60) -> tuple[int, str]:
    """Run ``cmd`` with its output (stdout and stderr) read line by line as it comes: each line
    goes to ``on_line`` and ``log``; returns the exit code and the last ``keep`` lines."""
    last: deque[str] = deque(maxlen=keep)
    with subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            last.append(line)
            if log is not None:
                log.write(line)
            if on_line is not None:
                on_line(line)
    return proc.returncode, "".join(last)


_SIZE = re.compile(r"\(([\d.]+)\s*(kB|MB|GB)\)")
_UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9}


class PipProgress:
    """Reads pip's output lines into a status: packages collected and downloaded, megabytes
    announced, and the step pip is at (pip draws its own bar only on a terminal)."""

    def __init__(self, heartbeat: Heartbeat, packages: int) -> None:
        self.heartbeat = heartbeat
        self.packages = packages
        self.collected = 0
        self.downloaded = 0
        self.megabytes = 0.0

    def __call__(self, line: str) -> None:
        text = line.strip()
        if text.startswith("Collecting "):
            self.collected += 1
        elif text.startswith("Downloading "):
            self.downloaded += 1
            if match := _SIZE.search(text):
                self.megabytes += float(match.group(1)) * _UNITS[match.group(2)] / 1e6
        elif text.startswith(("Using cached", "File was already downloaded")):
            self.downloaded += 1
        elif text.startswith(("Installing collected packages", "Successfully downloaded")):
            self.heartbeat.update(f"all {self.packages} downloaded "
                                  f"({self.megabytes:,.0f} MB); "
                                  f"{'installing' if 'Installing' in text else 'checking'}")
            return
        else:
            return
        self.heartbeat.update(f"{self.downloaded}/{self.packages} downloaded "
                              f"({self.megabytes:,.0f} MB), {self.collected} found")
