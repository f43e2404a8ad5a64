"""A worker process drains on SIGTERM however many arrive: a replica's stop sends two (drain,
then stop), and a drain run inside a Python signal handler deadlocked when the second signal
interrupted the first one's ``Event.set()``. The drain now runs as a callback of the event
loop, so a burst of signals ends the worker as one does."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from tests.service.serve_process import WorkerCommand

# starts a worker command: a longer bound than the suite's 60 s
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]


def _worker_processes(command: int) -> list[int]:
    """The worker processes of a ``dst-judge worker`` command: its grandchildren (the fork
    server, its child, forks them)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    children = {pid for pid, parent in parents.items() if parent == command}
    return [pid for pid, parent in parents.items() if parent in children]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_a_burst_of_sigterms_drains_a_worker_process_once(tmp_path):
    db = f"sqlite:///{tmp_path / 'queue.db'}"
    with WorkerCommand(tmp_path / "w", db=db, args=["--jobs", "1"], max_seconds=120) as worker:
        deadline = time.monotonic() + 60
        while "job slot(s)" not in worker.text():
            assert time.monotonic() < deadline and worker.process.poll() is None, worker.text()
            time.sleep(0.1)
        time.sleep(1.0)  # the worker process's loop is running
        processes = _worker_processes(worker.process.pid)
        assert len(processes) == 1, processes
        # signals spread over a second, each one landing wherever the last one's drain is
        # (a burst sent at once would arrive as one pending signal)
        until = time.monotonic() + 1.0
        with contextlib.suppress(ProcessLookupError):
            while time.monotonic() < until:
                os.kill(processes[0], signal.SIGTERM)
                time.sleep(0.0002)
        started = time.monotonic()
        code = worker.stop(timeout=30)
        took = time.monotonic() - started
    assert code == 0, worker.text()[-4000:]
    assert took < 15, (took, worker.text()[-4000:])
    log = worker.text()
    assert "dst-judge worker: stopped (" in log and "Traceback" not in log
    assert f":{processes[0]}:" in log.split("worker process ")[-1]  # it exited by itself
