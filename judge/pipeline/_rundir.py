"""Run directories, read and written in one place: an append-only log of finished calls, a
manifest of everything the answers depend on, and the results (``judgments.jsonl`` and
``summary.json``) that later commands read.

Each finished call is appended to ``calls.jsonl`` and flushed before the next one is started, so
Ctrl-C or ``kill -9`` loses at most calls in flight. ``--resume`` reuses every logged call (none
is sent again) after checking that the manifest still matches: data files, options that shape
the answers, template hashes and rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from .._digest import file_digest, text_digest
from .._errors import InputError, OptionError
from .._io import iter_jsonl_lines, loads, read_json, validation_error
from ._files import JudgmentRow, RunManifest, RunSummary
from ._plan import EvaluationPlan

RUN_LOG = "calls.jsonl"
MANIFEST = "manifest.json"
JUDGMENTS = "judgments.jsonl"
SUMMARY = "summary.json"
MANIFEST_FORMAT = 1
_COMPARED = ("inputs", "config", "templates")


class RunDirectory:
    """The run log and manifest of one ``--out`` directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.log_path = self.path / RUN_LOG
        self.manifest_path = self.path / MANIFEST
        self._handle: TextIO | None = None

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

    def read_log(self) -> list[dict[str, Any]]:
        """Logged call results; a torn last line (killed mid-write) is ignored."""
        if not self.log_path.is_file():
            return []
        entries = []
        # iter_jsonl_lines splits on "\n" only: str.splitlines() would also split inside a
        # reply holding U+2028 or U+0085, which json.dumps(ensure_ascii=False) leaves raw
        for _, text in iter_jsonl_lines(self.log_path):
            try:
                entries.append(json.loads(text))
            except json.JSONDecodeError:
                continue
        return entries

    def start(self, manifest: dict[str, Any], *, resume: bool) -> list[dict[str, Any]]:
        """Open the run: check or write the manifest; return the results logged so far.

        A directory whose logged calls were made with the same inputs simply continues
        (re-running a finished run sends nothing); one made with other inputs is refused,
        so that paid work is never overwritten.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        previous = self.read_manifest()
        logged = self.read_log()
        if resume and previous is None:
            raise OptionError(f"nothing to resume in {self.path} (no {MANIFEST})")
        if previous is not None and (resume or logged):
            changed = [key for key in _COMPARED if previous.get(key) != manifest.get(key)]
            if changed:
                details = _differences(previous, manifest)
                raise OptionError(
                    f"{self.path} holds a run whose {', '.join(changed)} differ from this one "
                    f"({details}); use a new --out directory")
        elif logged:
            raise OptionError(f"{self.path} holds a call log without a manifest; use a new "
                              "--out directory")
        self.manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
        self._handle = self.log_path.open("a", encoding="utf-8")
        return logged

    def append(self, result: Any) -> None:
        """Log one finished call and flush it to the operating system at once."""
        assert self._handle is not None, "start() first"
        self._handle.write(json.dumps(vars(result), ensure_ascii=False) + "\n")
        self._handle.flush()

    def drop_errors(self) -> int:
        """Remove logged calls that ended in an error (for ``retry-errors``); returns count."""
        logged = self.read_log()
        kept = [e for e in logged if not e.get("error")]
        removed = len(logged) - len(kept)
        tmp = self.log_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept),
                       encoding="utf-8")
        tmp.replace(self.log_path)
        return removed

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    out = []
    for section in _COMPARED:
        a, b = old.get(section) or {}, new.get(section) or {}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{section}.{key}")
    return ", ".join(out[:6])


def build_manifest(plan: EvaluationPlan, sources: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a run's answers depend on, for refusing to resume over changed inputs."""
    rules = asdict(plan.rules)
    rules.pop("source", None)
    return {
        "format": MANIFEST_FORMAT,
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
    """Write ``judgments.jsonl`` (one row per turn) and ``summary.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    judgments = out / JUDGMENTS
    with judgments.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary_path = out / SUMMARY
    summary_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    return judgments, summary_path


_ROW_FIELDS = ("dialogue_id", "turn_index", "verdict", "rule")


@dataclass
class Run:
    """One judge run as written by ``evaluate`` or ``batch collect``."""

    path: Path
    summary: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """A short name: method, prompt variant when not zero-shot, semantics when paper."""
        s = self.summary
        name = s.get("method", "?")
        if s.get("prompt_variant", "zero-shot") != "zero-shot":
            name += f" ({s['prompt_variant']})"
        if s.get("semantics") == "paper":
            name += " [paper]"
        return name

    @property
    def turn_keys(self) -> list[tuple[str, int]]:
        return [(r["dialogue_id"], r["turn_index"]) for r in self.rows]


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
    for line, text in iter_jsonl_lines(rows_path):
        try:
            row = loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", path=rows_path, line=line) from None
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
