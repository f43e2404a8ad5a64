"""``llama-server`` compiled from the llama.cpp tree vendored in the ``llama-cpp-python`` sdist.

Debian ships no llama.cpp and ``llama-cpp-python`` is source-only on PyPI, so pip (for the
sources) and cmake are the only ways in. The binary is compiled for the host CPU
(``-march=native``) and cached per CPU, or built portable on request.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

from ..._digest import file_digest
from ..._errors import BuildToolMissing, ChecksumError, LocalSetupError
from ..._io import replace_whole
from . import _progress, _registry
from ._common import console_for, now, progress_bar, say, tail, write_json_atomic
from ._progress import Heartbeat, PipProgress, run_streamed
from ._registry import LLAMA_CPP_PYTHON_VERSION, cache_root, cpu_key, is_executable, server_binary

CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # otherwise the build downloads a web UI
)
PORTABLE_FLAGS: tuple[str, ...] = ("-DGGML_NATIVE=OFF",)
INSTALL_HINT = ("install them, e.g. `apt-get install cmake g++` (Debian/Ubuntu), "
                "`dnf install cmake gcc-c++ make` (Fedora) or `brew install cmake` (macOS)")
_BUILD_TOOL = "build tool (make or ninja)"


# --- tools -------------------------------------------------------------------------------------


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
        _BUILD_TOOL: ["make", "ninja"],
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


# --- sources -----------------------------------------------------------------------------------


def _download_sdist(dest: Path, *, quiet: bool, console: Console | None = None) -> Path:
    """Fetch the ``llama-cpp-python`` sdist whose vendored llama.cpp tree we build, pinned by
    its sha256 (pip's hash-checking mode, then hashed again here, before anything unpacks it);
    unless ``quiet``, a line every few seconds on ``console`` says how far pip is."""
    dest.mkdir(parents=True, exist_ok=True)
    pinned = _registry.LLAMA_CPP_PYTHON_SHA256
    requirements = dest / "requirements.txt"
    requirements.write_text(f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} "
                            f"--hash=sha256:{pinned}\n", encoding="utf-8")
    cmd = [*_progress.PIP, "download", "--no-deps", "--no-binary", ":all:", "--require-hashes",
           "--disable-pip-version-check", "-d", str(dest),
           *(["-q"] if quiet else []), "-r", str(requirements)]
    with Heartbeat("downloading the llama.cpp sources", None if quiet else console) as beat:
        code, last = run_streamed(cmd, PipProgress(beat, 1))
    what = f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} (source)"
    if code != 0 and "DO NOT MATCH THE HASHES" in last:
        raise ChecksumError(f"pip refused {what}: the download does not match its pinned "
                            f"sha256 {pinned}:\n{last[-1500:]}")
    archives = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if code != 0 or not archives:
        raise LocalSetupError(f"pip could not download {what}: {last[-1500:]}")
    if (actual := file_digest(archives[0])) != pinned:
        archives[0].unlink()
        raise ChecksumError(f"{archives[0].name} does not match its pinned sha256 (got "
                            f"{actual}, expected {pinned}); it was deleted, nothing was built")
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


# --- compiling ---------------------------------------------------------------------------------


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
    code, _ = run_streamed(cmd, on_line, log=log)
    log.flush()
    if code != 0:
        raise LocalSetupError(f"{what} failed (exit code {code}); last lines of "
                              f"{log_path}:\n{tail(log_path)}")


def build_status(line: str, fraction: float | None) -> str | None:
    """The heartbeat's status for a build output line: the percentage and what is being
    compiled or linked (``42 %: ggml-cpu.c``); None for a line that says nothing new."""
    text = line.strip()
    target = re.search(r"(?:Building \w+ object|Linking \w+ \w+)\s+(\S+)", text)
    if target is None:
        return None
    name = target.group(1).rsplit("/", 1)[-1].removesuffix(".o")
    done = f"{100 * fraction:.0f} %" if fraction is not None else "compiling"
    return f"{done}: {'linking ' if text.count('Linking') else ''}{name}"


def _cmake_commands(tools: dict[str, str], source: Path, build_dir: Path, *, portable: bool,
                    jobs: int) -> tuple[list[str], list[str]]:
    """The configure and build command lines (Ninja when that is the build tool found)."""
    configure = [tools["cmake"], "-S", str(source), "-B", str(build_dir), *CMAKE_FLAGS,
                 *(PORTABLE_FLAGS if portable else ())]
    if Path(tools[_BUILD_TOOL]).name.startswith("ninja"):
        configure += ["-G", "Ninja"]
    build = [tools["cmake"], "--build", str(build_dir), "--config", "Release",
             "--target", "llama-server", "-j", str(jobs)]
    return configure, build


def _compile(configure: Sequence[str], build: Sequence[str], log_path: Path,
             console: Console | None, progress: bool) -> None:
    """Run both cmake steps into ``log_path`` with a bar fed by the build's own percentages."""
    columns = (TextColumn("compiling"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn())
    beat = Heartbeat("building llama-server", console if progress else None)
    with log_path.open("w", encoding="utf-8") as log, \
            progress_bar(console, progress, *columns) as bar, beat:
        task = bar.add_task("configure", total=100)
        fraction: float | None = None

        def advance(line: str) -> None:
            nonlocal fraction
            found = _build_fraction(line)
            if found is not None:
                fraction = found
                bar.update(task, completed=100 * found)
            status = build_status(line, fraction)
            if status is not None:
                beat.update(status)

        beat.update("configuring (cmake)")
        _run_logged(configure, log, log_path, "cmake configure")
        beat.update("compiling")
        _run_logged(build, log, log_path, "cmake build", advance)


def _install_binary(built: Path, dest: Path, log_path: Path) -> None:
    """Copy the fresh binary into its cache slot; the rename makes it appear all at once."""
    if not built.is_file():
        raise LocalSetupError(f"the build finished but {built} does not exist; see {log_path}")

    def copy(part: Path) -> None:
        shutil.copy2(built, part)
        part.chmod(0o755)

    replace_whole(dest, copy)


# --- the whole step ----------------------------------------------------------------------------


def build_server(*, cache_dir: str | Path | None = None, portable: bool = False,
                 jobs: int | None = None, progress: bool = True,
                 console: Console | None = None) -> tuple[Path, bool]:
    """Build ``llama-server`` unless this CPU's (or the portable) binary is cached.

    Returns (path, built). The build takes minutes, so it happens once per CPU and version.
    """
    cache = cache_root(cache_dir)
    dest = server_binary(cache, portable=portable)
    if is_executable(dest):
        return dest, False
    tools = check_build_tools()
    console = console_for(console, progress)
    work = cache / "build"
    if work.exists():
        shutil.rmtree(work)
    log_path = cache / "build.log"
    jobs = jobs or os.cpu_count() or 1
    say(console, f"downloading the llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sources ...")
    archive = _download_sdist(work / "sdist", quiet=not progress or console is None,
                              console=console)
    source = _unpack_sdist(archive, work / "src")
    build_dir = work / "build"
    configure, build = _cmake_commands(tools, source, build_dir, portable=portable, jobs=jobs)
    say(console, f"building llama-server ({'portable' if portable else 'for this CPU'}, "
        f"{jobs} jobs; takes minutes; log: {log_path})")
    _compile(configure, build, log_path, console, progress)
    _install_binary(build_dir / "bin" / "llama-server", dest, log_path)
    write_json_atomic(dest.parent / "build.json", {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "portable": portable,
        "cpu_key": None if portable else cpu_key(), "cmake_flags": configure[5:],
        "built": now()})
    shutil.rmtree(work, ignore_errors=True)
    say(console, f"llama-server: {dest}")
    return dest, True
