"""What is set up and running, and the judge options that point ``evaluate --local`` at it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..._errors import LocalServerError
from ._install import is_verified
from ._registry import (
    MODELS,
    SERVER_ALIAS,
    cache_root,
    find_server_binary,
    model_file,
    state_file,
)
from ._server import ServerInfo, health, is_our_server, read_state


@dataclass(frozen=True)
class LocalStatus:
    """Server state plus what is set up in the cache."""

    cache_dir: Path
    state: Literal["running", "unhealthy", "stopped", "stale"]
    server: ServerInfo | None
    models: dict[str, Path | None]
    binary: Path | None
    message: str


def status(*, cache_dir: str | Path | None = None) -> LocalStatus:
    """Report the recorded server (running, unhealthy, stale or stopped) and the cache."""
    cache = cache_root(cache_dir)
    path = state_file(cache)
    models = {name: (model_file(name, cache) if is_verified(model_file(name, cache), m.sha256)
                     else None) for name, m in MODELS.items()}
    binary = find_server_binary(cache)
    try:
        info = read_state(path)
    except ValueError:
        return LocalStatus(cache, "stale", None, models, binary, f"{path} is unreadable")
    if info is None:
        return LocalStatus(cache, "stopped", None, models, binary, "no local server is running")
    if not is_our_server(info):
        return LocalStatus(cache, "stale", info, models, binary,
                           f"{path} names pid {info.pid}, which is no longer a llama-server")
    if health(info.host, info.port):
        return LocalStatus(cache, "running", info, models, binary,
                           f"llama-server pid {info.pid} serves model {info.model} at "
                           f"{info.base_url}")
    return LocalStatus(cache, "unhealthy", info, models, binary,
                       f"llama-server pid {info.pid} runs but /health does not answer ok "
                       f"(still loading?); log: {info.log}")


def local_base_url(cache_dir: str | Path | None = None) -> str | None:
    """Base URL of the recorded server when it is alive and healthy, else None."""
    try:
        info = read_state(state_file(cache_dir))
    except ValueError:
        return None
    if info is None or not is_our_server(info):
        return None
    return info.base_url if health(info.host, info.port) else None


def local_config_values(cache_dir: str | Path | None = None) -> dict[str, Any]:
    """Judge options for ``evaluate --local``: the running server, its alias, few-shot prompts
    (a small local model mostly answers ``{}`` to the zero-shot ones)."""
    url = local_base_url(cache_dir)
    if url is None:
        raise LocalServerError("no healthy local server: run `dst-judge local setup` once, then "
                               "`dst-judge local serve`")
    # A 1.5B model on a few CPU cores can need minutes per reply: a short timeout would only
    # cancel and resend work the server is still doing.
    return {"base_url": url, "model": SERVER_ALIAS, "prompt_variant": "few-shot",
            "timeout": 900.0, "max_retries": 1}
