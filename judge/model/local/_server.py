"""One detached ``llama-server`` per cache directory, recorded in ``server.json``.

The server outlives the command that started it (its own session), so the state file is the
only link back to it: serve writes it, stop and status read it, and both distrust a record whose
process is gone or is no longer our llama-server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from ..._errors import LocalServerError, LocalSetupError
from ._common import now, say, tail, write_json_atomic
from ._install import is_verified
from ._process import CHILDREN, alive, cmdline, is_llama_server, terminate
from ._registry import (
    DEFAULT_MODEL,
    SERVER_ALIAS,
    cache_root,
    find_server_binary,
    get_model,
    is_executable,
    model_file,
    state_file,
)


@dataclass(frozen=True)
class ServerInfo:
    """The running server as recorded in ``server.json``."""

    pid: int
    port: int
    base_url: str
    host: str = "127.0.0.1"
    model: str = ""
    model_path: str = ""
    binary: str = ""
    log: str = ""
    started: str = ""
    ctx: int = 0
    threads: int = 0
    parallel: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerInfo:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# --- the state file and the process behind it -------------------------------------------------


def read_state(path: Path) -> ServerInfo | None:
    """The recorded server; raises ValueError for a file that cannot be read as one."""
    if not path.is_file():
        return None
    try:
        info = ServerInfo.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from exc
    if not isinstance(info.pid, int) or not isinstance(info.port, int):
        raise ValueError("pid and port must be integers")
    return info


def is_our_server(info: ServerInfo) -> bool:
    """The recorded process is alive and is still the llama-server we started on its port."""
    return alive(info.pid) and is_llama_server(info.pid, info.port)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def health(host: str, port: int, timeout: float = 2.0) -> bool:
    """llama-server answers 503 while loading and ``{"status": "ok"}`` once it can serve."""
    url = f"http://{_url_host(host)}:{port}/health"
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(url)
        return response.status_code == 200 and response.json().get("status") == "ok"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


# --- serve, step by step ----------------------------------------------------------------------


def _clear_previous_state(path: Path, console: Console | None) -> None:
    """Refuse while the recorded server lives; drop a record that is unreadable or stale."""
    try:
        existing = read_state(path)
    except ValueError:
        say(console, f"removing unreadable {path}")
        path.unlink(missing_ok=True)
        return
    if existing is None:
        return
    if is_our_server(existing):
        raise LocalServerError(
            f"a local llama-server is already running (pid {existing.pid}, model "
            f"{existing.model}, {existing.base_url}; recorded in {path}): stop it first with "
            "`dst-judge local stop`")
    say(console, f"removing stale {path} (pid {existing.pid} is no longer a llama-server)")
    path.unlink(missing_ok=True)


def _installed(model: str, cache: Path, binary: str | Path | None) -> tuple[Path, Path]:
    """The verified weights and an executable server, or a message saying to run setup."""
    weights = model_file(model, cache)
    if not is_verified(weights, get_model(model).sha256):
        raise LocalSetupError(f"model {model} is not set up in {cache}: run "
                              f"`dst-judge local setup --model {model}` first")
    exe = Path(binary) if binary is not None else find_server_binary(cache)
    if exe is None or not is_executable(exe):
        raise LocalSetupError(f"llama-server is not built in {cache}: run "
                              "`dst-judge local setup` first")
    return weights, exe


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _choose_port(host: str, port: int | None) -> int:
    """The requested port when it is free, else an error; any free port when none was asked."""
    if port is None:
        return _free_port(host)
    if not _port_free(host, port):
        raise LocalServerError(f"port {port} on {host} is already in use: choose another "
                               "--port or omit it to pick a free one")
    return port


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _launch(cmd: list[str], cache: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start the server in its own session, its output (after the command line) in the log."""
    cache.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        log.write(f"$ {shlex.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=cache, start_new_session=True)
    CHILDREN[proc.pid] = proc
    return proc


def _wait_healthy(info: ServerInfo, proc: subprocess.Popen[bytes], wait: float,
                  log_path: Path) -> None:
    deadline = time.monotonic() + wait
    while True:
        code = proc.poll()
        if code is not None:
            CHILDREN.pop(proc.pid, None)
            raise LocalServerError(f"llama-server exited with code {code} while starting; "
                                   f"last lines of {log_path}:\n{tail(log_path)}")
        if health(info.host, info.port):
            return
        if time.monotonic() >= deadline:
            raise LocalServerError(f"llama-server did not become healthy within {wait:g} s "
                                   f"and was stopped; last lines of {log_path}:\n"
                                   f"{tail(log_path)}")
        time.sleep(0.25)


def _wait_or_undo(info: ServerInfo, proc: subprocess.Popen[bytes], wait: float,
                  log_path: Path, path: Path) -> None:
    """Wait until healthy; on any failure stop the process and forget the record."""
    try:
        _wait_healthy(info, proc, wait, log_path)
    except BaseException:
        if proc.poll() is None:  # an exited process's PID may already belong to another
            terminate(proc.pid, timeout=5.0)
        CHILDREN.pop(proc.pid, None)
        path.unlink(missing_ok=True)
        raise


def serve(model: str = DEFAULT_MODEL, *, port: int | None = None, host: str = "127.0.0.1",
          ctx: int = 16384, threads: int | None = None, parallel: int = 2,
          cache_dir: str | Path | None = None, wait: float = 120.0,
          binary: str | Path | None = None, console: Console | None = None) -> ServerInfo:
    """Start ``llama-server`` detached, record it in ``server.json`` and wait until healthy.

    The process gets its own session so it outlives the command that started it; stop it with
    :func:`stop`. One server per cache directory: a second start is refused while the recorded
    one lives.
    """
    get_model(model)  # an unknown model is an option error before anything else
    cache = cache_root(cache_dir)
    path = state_file(cache)
    _clear_previous_state(path, console)
    weights, exe = _installed(model, cache, binary)
    port = _choose_port(host, port)
    threads = threads or _default_threads()
    cmd = [str(exe), "-m", str(weights), "--alias", SERVER_ALIAS, "--host", host,
           "--port", str(port), "-c", str(ctx), "-t", str(threads), "-np", str(parallel)]
    log_path = cache / "server.log"
    proc = _launch(cmd, cache, log_path)
    info = ServerInfo(pid=proc.pid, port=port, host=host,
                      base_url=f"http://{_url_host(host)}:{port}/v1", model=model,
                      model_path=str(weights), binary=str(exe), log=str(log_path),
                      started=now(), ctx=ctx, threads=threads, parallel=parallel)
    write_json_atomic(path, asdict(info))
    _wait_or_undo(info, proc, wait, log_path, path)
    return info


# --- stop --------------------------------------------------------------------------------------


def stop(*, cache_dir: str | Path | None = None, timeout: float = 10.0) -> str:
    """Stop the server recorded in ``server.json`` and say what happened.

    Only a PID whose command line is a llama-server on the recorded port is signalled, so a
    recycled PID is never killed. A file naming a dead process is removed.
    """
    path = state_file(cache_dir)
    try:
        info = read_state(path)
    except ValueError as exc:
        path.unlink(missing_ok=True)
        return f"removed unreadable {path} ({exc}); no server was signalled"
    if info is None:
        return "no local server is running"
    if not alive(info.pid):
        path.unlink(missing_ok=True)
        return f"removed stale {path}: pid {info.pid} is not running"
    if not is_llama_server(info.pid, info.port):
        shown = " ".join(cmdline(info.pid) or ["(unknown)"])[:200]
        raise LocalServerError(
            f"refusing to stop pid {info.pid}: it is not a llama-server on port {info.port} "
            f"(command line: {shown}). The recorded server is gone and its PID was reused; "
            f"delete {path} if you are sure.")
    killed = terminate(info.pid, timeout)
    path.unlink(missing_ok=True)
    how = "killed (SIGKILL after no exit on SIGTERM)" if killed else "stopped"
    return f"{how} llama-server pid {info.pid} ({info.base_url})"


@contextlib.contextmanager
def running_server(model: str = DEFAULT_MODEL, **options: Any) -> Iterator[ServerInfo]:
    """Serve for the duration of a ``with`` block and always stop the server afterwards."""
    info = serve(model, **options)
    try:
        yield info
    finally:
        stop(cache_dir=options.get("cache_dir"))
