"""Run directories, read and written in one place: an append-only log of finished calls, a
manifest of everything the answers depend on, and the results (``judgments.jsonl`` and
``summary.json``) that later commands read.

A run directory belongs to one run. While a command writes it, it holds an exclusive lock
(``run.lock``, ``flock``: released by the kernel even on ``kill -9``); a second process is
refused and told who holds it. Files are only written under a manifest of this same run: a
directory holding another run's results, or results without a manifest, is refused with
every file left byte-identical (``force`` replaces them, keeping the ledger of paid replies).

Each finished call is appended to ``calls.jsonl`` and flushed before the next one is started.
Raw replies are in the ledger the moment they arrive (:mod:`judge.store`), so ``kill -9``
loses nothing paid: ``--resume`` takes finished calls from the log and every paid request of
an unfinished call from the ledger. A log torn by a kill mid-write loses its last line, which
is cut off before appending (its call comes back from the ledger).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from .._digest import file_digest, text_digest
from .._errors import InputError, OptionError, RunConflict, RunLocked
from .._io import (
    iter_jsonl_lines,
    json_error_message,
    loads,
    read_json,
    replace_whole,
    validation_error,
)
from ..store import LEDGER_FILE
from ._files import JudgmentRow, RunManifest, RunSummary
from ._plan import EvaluationPlan
from ._store import Run, same_run

if sys.platform != "win32":  # POSIX; elsewhere the lock is best effort (see RunDirectory.lock)
    import fcntl

RUN_LOG = "calls.jsonl"
MANIFEST = "manifest.json"
JUDGMENTS = "judgments.jsonl"
SUMMARY = "summary.json"
LOCK = "run.lock"
MANIFEST_FORMAT = 1
OWNED = (MANIFEST, RUN_LOG, JUDGMENTS, SUMMARY)
"""Files a run writes and may only overwrite under its own manifest."""
_RESULT_FIELDS = ("dimension", "custom_id", "template_hash", "prompt_hash")
"""Fields every logged call has (a line without one is corrupt)."""


def _json_line(value: Any) -> bytes:
    """One JSON Lines record. Text stays readable (no ASCII escapes); a lone surrogate, which
    UTF-8 cannot carry, is written as its JSON escape (backslashreplace), so it reads back."""
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def _write_atomic(path: Path, data: bytes) -> None:
    """Write a file whole or not at all (a kill mid-write leaves the old file)."""
    replace_whole(path, lambda part: part.write_bytes(data))


class RunDirectory:
    """The run log, manifest, results and lock of one ``--out`` directory: the folder's
    :class:`~judge.pipeline.RunStore`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.log_path = self.path / RUN_LOG
        self.manifest_path = self.path / MANIFEST
        self._handle: BinaryIO | None = None
        self._lock: int | None = None
        self._created_lock = False
        self.run_id: str | None = None
        self.dropped = 0
        """Logged calls that ended in an error and were dropped to be sent again."""

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def ledger_path(self) -> Path:
        """Where the run keeps its own ledger of paid replies when the cache is off."""
        return self.path / LEDGER_FILE

    # --- ownership ----------------------------------------------------------------------------

    def lock(self) -> None:
        """Take the directory's exclusive lock, or raise :class:`RunLocked` naming the holder."""
        if self._lock is not None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                self._created_lock = True
            except FileExistsError:
                fd = os.open(self.path / LOCK, os.O_RDWR)
                self._created_lock = False
        except OSError as exc:
            raise OptionError(f"cannot use {self.path} as a run directory: {exc}") from None
        if sys.platform != "win32":
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _holder(fd)
                os.close(fd)
                raise RunLocked(f"{self.path} is in use by another dst-judge process "
                                f"({holder}); wait for it to finish or use another --out "
                                "directory") from None
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                "command": " ".join(sys.argv[:3])[:200]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
        self._lock = fd

    def unlock(self) -> None:
        fd, self._lock = self._lock, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases the flock

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest, or None when there is none; a damaged one is an InputError."""
        if not self.manifest_path.is_file():
            return None
        data = read_json(self.manifest_path)
        try:
            RunManifest.model_validate(data)
        except ValidationError as exc:
            raise validation_error(exc, path=self.manifest_path, line=None) from None
        return data

    def start(self, manifest: dict[str, Any], *, resume: bool, force: bool = False,
              retry_failed: bool = False) -> list[dict[str, Any]]:
        """Lock the directory and open the run: check or write the manifest; return the
        calls logged so far.

        The same run (same kind, inputs, options, templates) simply continues: re-running a
        finished run sends nothing. Anything else is refused with :class:`RunConflict`
        unless ``force``, which starts afresh. ``retry_failed`` drops logged calls that ended
        in an error first (``retry-errors``).
        """
        self.lock()
        try:
            return self._start(manifest, resume=resume, force=force, retry_failed=retry_failed)
        except BaseException:
            if self._created_lock and not self.manifest_path.exists():
                # refused before writing anything: leave no trace in someone else's folder
                with contextlib.suppress(OSError):
                    (self.path / LOCK).unlink()
            self.close()
            raise

    def _start(self, manifest: dict[str, Any], *, resume: bool, force: bool,
               retry_failed: bool) -> list[dict[str, Any]]:
        previous = self.read_manifest()
        present = [name for name in OWNED if (self.path / name).exists()]
        if resume and previous is None:
            raise OptionError(f"nothing to resume in {self.path} (no {MANIFEST})")
        fresh = not same_run(previous, manifest, force=force, holder=str(self.path),
                             advice="Use another --out directory (or --force to replace its "
                                    "results)")
        if previous is None and present and not force:
            raise RunConflict(
                f"{self.path} holds {', '.join(present)} but no {MANIFEST}: results this run "
                "did not write; nothing was changed. Use another --out directory (or --force "
                "to replace them)")
        if fresh:
            for name in (RUN_LOG, JUDGMENTS, SUMMARY):
                with contextlib.suppress(FileNotFoundError):
                    (self.path / name).unlink()
            self.run_id = uuid.uuid4().hex
        else:
            assert previous is not None
            self.run_id = str(previous.get("run_id") or uuid.uuid4().hex)
        manifest = {**manifest, "run_id": self.run_id}
        _write_atomic(self.manifest_path, (json.dumps(manifest, indent=2, ensure_ascii=False)
                                           + "\n").encode("utf-8"))
        self._cut_torn_tail()
        if retry_failed:
            self.drop_errors()
        logged = self.read_log()
        self._handle = self.log_path.open("ab")
        return logged

    # --- the run log --------------------------------------------------------------------------

    def _cut_torn_tail(self) -> None:
        """Cut a last line without its newline (the process died writing it)."""
        if not self.log_path.is_file():
            return
        with self.log_path.open("rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(max(0, size - 1))
            if handle.read(1) == b"\n":
                return
            keep = 0
            position = size
            while position > 0:  # find the last newline, reading backwards in blocks
                step = min(65536, position)
                position -= step
                handle.seek(position)
                found = handle.read(step).rfind(b"\n")
                if found >= 0:
                    keep = position + found + 1
                    break
            handle.truncate(keep)

    def read_log(self) -> list[dict[str, Any]]:
        """Logged call results; a torn last line (killed mid-write) is ignored, any other
        line that is not a logged call is an :class:`InputError` naming file, line and field."""
        if not self.log_path.is_file():
            return []
        try:
            data = self.log_path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read the run log: {exc}", path=self.log_path) from None
        # split on "\n" only: str.splitlines() would also split inside a reply holding U+2028
        # or U+0085, which json.dumps(ensure_ascii=False) leaves raw
        lines = data.split(b"\n")
        if lines and lines[-1]:
            lines[-1] = b""  # torn: no newline after the last record
        entries = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(f"not a logged call (invalid JSON: {exc})",
                                 path=self.log_path, line=number) from None
            if not isinstance(entry, dict):
                raise InputError("a logged call must be a JSON object", path=self.log_path,
                                 line=number)
            for name in _RESULT_FIELDS:
                if not isinstance(entry.get(name), str):
                    raise InputError("a logged call lacks this field (or it is not a string)",
                                     path=self.log_path, line=number, field=name)
            entries.append(entry)
        return entries

    def append(self, result: Any) -> None:
        """Log one finished call and flush it to the operating system at once."""
        assert self._handle is not None, "start() first"
        self._handle.write(_json_line(vars(result)))
        self._handle.flush()

    def drop_errors(self) -> int:
        """Remove logged calls that ended in an error (for ``retry-errors``); returns count."""
        logged = self.read_log()
        kept = [e for e in logged if not e.get("error")]
        removed = len(logged) - len(kept)
        if removed:
            _write_atomic(self.log_path, b"".join(_json_line(e) for e in kept))
        self.dropped = removed
        return removed

    def write_results(self, rows: Sequence[dict[str, Any]], summary: dict[str, Any]) -> None:
        """Write ``judgments.jsonl`` and ``summary.json`` (each whole or not at all)."""
        assert self._lock is not None, "start() first"
        write_results(self.path, rows, summary)

    def read_run(self) -> Run:
        """The finished run's results (see :func:`load_run`)."""
        return load_run(self.path)

    def close(self) -> None:
        """Close the log and give the lock back."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self.unlock()


def _holder(fd: int) -> str:
    """Who holds a run directory's lock, from what it wrote into the lock file."""
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        if isinstance(info, dict) and info.get("pid"):
            return (f"pid {info['pid']} on host {info.get('host', '?')}, since "
                    f"{info.get('since', '?')}")
    return "holder unknown"


def build_manifest(plan: EvaluationPlan, sources: dict[str, Any] | None = None, *,
                   kind: str = "evaluate") -> dict[str, Any]:
    """What a run's answers depend on, for refusing to resume over changed inputs.

    ``kind`` is ``evaluate`` (live) or ``batch`` (collected): a directory holds one of them.
    """
    rules = asdict(plan.rules)
    rules.pop("source", None)
    return {
        "format": MANIFEST_FORMAT,
        "kind": kind,
        "inputs": {
            "schema": text_digest(plan.schema.model_dump(mode="json")),
            "dialogues": file_digest(plan.dialogues.path),
            "predictions": file_digest(plan.predictions.path),
            "selected_dialogues": text_digest([d.dialogue_id for d in plan.dialogues.dialogues]),
            "rules": text_digest(rules),
        },
        "config": plan.config.answer_identity(),
        "templates": {d: plan.prompts.template_hash(d) for d in plan.prompts.dimensions},
        "sources": {"dialogues": plan.dialogues.path, "predictions": plan.predictions.path,
                    "dialogue_ids": [d.dialogue_id for d in plan.dialogues.dialogues],
                    **(sources or {})},
        "options": plan.config.public_dict(),
    }


def write_results(out_dir: str | Path, rows: Sequence[dict[str, Any]],
                  summary: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``judgments.jsonl`` (one row per turn) and ``summary.json``, each whole or not at
    all. This writes without any ownership check: commands write through
    :meth:`RunDirectory.write_results` under the directory's lock and manifest."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    judgments = out / JUDGMENTS

    def write_rows(part: Path) -> None:
        # a lone surrogate (a reply may hold one) becomes its JSON escape instead of an error
        with part.open("w", encoding="utf-8", errors="backslashreplace") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")

    replace_whole(judgments, write_rows)
    summary_path = out / SUMMARY
    _write_atomic(summary_path, (json.dumps(summary, indent=2, ensure_ascii=False)
                                 + "\n").encode("utf-8", "backslashreplace"))
    return judgments, summary_path


_ROW_FIELDS = ("dialogue_id", "turn_index", "verdict", "rule")


def load_run(path: str | Path) -> Run:
    """Load a run directory; a missing or malformed file is an :class:`InputError`."""
    folder = Path(path)
    summary_path, rows_path = folder / SUMMARY, folder / JUDGMENTS
    if not folder.is_dir():
        raise InputError("not a run directory (expected judgments.jsonl and summary.json)",
                         path=folder)
    summary = read_json(summary_path)
    if not isinstance(summary, dict):
        raise InputError("summary.json must hold a JSON object", path=summary_path)
    try:
        RunSummary.model_validate(summary)
    except ValidationError as exc:
        raise validation_error(exc, path=summary_path, line=None) from None
    rows = []
    for line, text in iter_jsonl_lines(rows_path, max_string=None):  # replies' own caps
        try:
            row = loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(json_error_message(exc), path=rows_path, line=line) from None
        missing = [f for f in _ROW_FIELDS if not isinstance(row, dict) or f not in row]
        if missing:
            raise InputError("a judgment row lacks this field", path=rows_path, line=line,
                             field=missing[0])
        try:
            JudgmentRow.model_validate(row)
        except ValidationError as exc:
            raise validation_error(exc, path=rows_path, line=line) from None
        rows.append(row)
    if not rows:
        raise InputError("no judgment rows", path=rows_path)
    return Run(folder, summary, rows)
