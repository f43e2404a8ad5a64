"""A real ``dst-judge serve`` in a subprocess on 127.0.0.1, for end-to-end tests and the
benchmarks: started on a free port, ready when ``/healthz`` answers, stopped with SIGTERM (or
killed with SIGKILL), and always gone when the test ends (it also stops itself after
``max_seconds``). Also a real Postgres for them (:func:`running_postgres`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.netguard.sitecustomize import subprocess_pythonpath

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m judge ARGS`` with this checkout on the path."""
    environment = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "judge", *args], capture_output=True,
                          text=True, env=environment, timeout=timeout, cwd=ROOT)
    if check and done.returncode != 0:
        raise AssertionError(f"dst-judge {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def create_token(data_dir: Path, project: str, scopes: str = "read,submit",
                 db: str | None = None) -> str:
    """A token made the way ``dst-judge serve token create`` makes it (in this process: a
    subprocess costs a whole import of the library)."""
    from judge.service import Database
    from judge.service import create_token as make

    data_dir.mkdir(parents=True, exist_ok=True)
    database = Database(db or f"sqlite:///{data_dir / 'dst-judge.db'}")
    try:
        database.migrate()
        return make(database, project, scopes)[0]
    finally:
        database.dispose()


class ServeProcess:
    """``dst-judge serve`` with the given data directory, endpoints and flags."""

    def __init__(self, data_dir: Path, *, endpoints: dict[str, Any] | None = None,
                 db: str | None = None, args: list[str] | None = None,
                 max_seconds: float = 600.0, log: Path | None = None) -> None:
        self.data_dir = data_dir
        self.endpoints = endpoints
        self.db = db
        self.args = args or []
        self.max_seconds = max_seconds
        self.port = free_port()
        self.log = log or data_dir / f"serve-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._admin: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "judge", "serve", "--port", str(self.port),
                   "--data-dir", str(self.data_dir), "--log-level", "warning",
                   "--max-seconds", str(self.max_seconds), *self.args]
        if self.endpoints is not None:
            file = self.data_dir / f"endpoints-{self.port}.json"
            file.write_text(json.dumps({"endpoints": self.endpoints}), encoding="utf-8")
            command += ["--endpoints", str(file)]
        if self.db:
            command += ["--db", self.db]
        env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT), "NO_PROXY": "127.0.0.1"}
        self._log_handle = self.log.open("ab")
        self.process = subprocess.Popen(command, stdout=self._log_handle,
                                        stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                        start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"dst-judge serve exited {self.process.returncode}:\n"
                                   + self.log.read_text(errors="replace")[-3000:])
            try:
                if self.health().get("status") == "ok":
                    return self
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"dst-judge serve on port {self.port} did not answer /healthz with "
                           f"status ok within {timeout} s:\n"
                           + self.log.read_text(errors="replace")[-3000:])

    def health(self, details: bool = False) -> dict[str, Any]:
        """``/healthz``; with ``details`` as an admin token sees it (version, database, this
        replica's worker), which the server shows no one else."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        headers = {"Authorization": f"Bearer {self.admin_token()}"} if details else {}
        request = urllib.request.Request(self.url + "/healthz", headers=headers)
        with opener.open(request, timeout=2) as response:
            return json.loads(response.read())

    def admin_token(self) -> str:
        """A token with the admin scope (project ``ops``), made on first use: what a probe or
        a Prometheus scrape of the details needs."""
        if self._admin is None:
            self._admin = create_token(self.data_dir, "ops", "admin", db=self.db)
        return self._admin

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (the drain); returns the exit code."""
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            self._close()

    def kill(self) -> None:
        """SIGKILL: the replica dies mid-work, as a crashed machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close()

    def errors(self, limit: int = 6000) -> str:
        """The errors this replica logged (tracebacks included), for a failing assertion's
        message: a job that failed on a server says only "see its log"."""
        if not self.log.is_file():
            return ""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        kept, inside = [], False
        for line in lines:
            if line[:4].isdigit():  # a new log record: keep it when it is an error
                inside = " ERROR " in line or " CRITICAL " in line
            if inside:
                kept.append(line)
        return "\n".join(kept)[-limit:]

    def _close(self) -> None:
        handle = getattr(self, "_log_handle", None)
        if handle is not None:
            handle.close()
            self._log_handle = None

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.terminate(timeout=30)


class WorkerCommand:
    """``dst-judge worker`` in a subprocess (no HTTP): started at once, stopped with SIGTERM
    (the drain) or killed, always gone when the test ends (``--max-seconds``)."""

    def __init__(self, data_dir: Path, *, db: str, endpoints: dict[str, Any] | None = None,
                 args: list[str] | None = None, max_seconds: float = 300.0) -> None:
        self.data_dir = data_dir
        self.db = db
        self.endpoints = endpoints
        self.args = args or []
        self.max_seconds = max_seconds
        self.log = data_dir / f"worker-{id(self):x}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerCommand:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "judge", "worker", "--db", self.db,
                   "--data-dir", str(self.data_dir), "--max-seconds", str(self.max_seconds),
                   *self.args]
        if self.endpoints is not None:
            file = self.data_dir / f"endpoints-worker-{id(self):x}.json"
            file.write_text(json.dumps({"endpoints": self.endpoints}), encoding="utf-8")
            command += ["--endpoints", str(file)]
        # PYTHONFAULTHANDLER: a SIGABRT before the kill writes every thread's stack to the log
        env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT), "NO_PROXY": "127.0.0.1",
               "PYTHONFAULTHANDLER": "1"}
        self._log_handle = self.log.open("ab")
        self.process = subprocess.Popen(command, stdout=self._log_handle,
                                        stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                        start_new_session=True)
        return self

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.is_file() \
            else ""

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            # it did not drain in time: its stacks (every process of the group) into the log,
            # for the test's message, then the kill
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGABRT)
                time.sleep(1.0)
                os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(10)
        finally:
            handle = getattr(self, "_log_handle", None)
            if handle is not None:
                handle.close()
                self._log_handle = None

    def __enter__(self) -> WorkerCommand:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop(timeout=30)


def get_text(url: str, timeout: float = 5.0, token: str | None = None) -> tuple[int, str]:
    """``GET url`` (127.0.0.1 only): status and body, errors included."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")


def job_dialogues(folder: Path, count: int) -> list[Path]:
    """One dialogues file per job, utterances tagged so that every job's calls are distinct."""
    lines = (EXAMPLES / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
    paths = []
    for index in range(count):
        rows = []
        for line in lines:
            dialogue = json.loads(line)
            for turn in dialogue["turns"]:
                turn["user"] = f"{turn['user']} (job {index})"
            rows.append(json.dumps(dialogue))
        path = folder / f"dialogues-{index:02d}.jsonl"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


@contextlib.contextmanager
def running_postgres(prefix: str = "dstj-pg-") -> Iterator[str]:
    """A real Postgres (pgserver: binaries from PyPI) in a temporary directory; yields its
    URL, stops it and removes the directory afterwards. Raises when it cannot start."""
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        server = pgserver.get_server(folder, cleanup_mode="stop")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        yield server.get_uri()
    finally:
        with contextlib.suppress(Exception):
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
