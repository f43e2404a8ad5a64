"""Reading a finished judge run directory (``judgments.jsonl`` + ``summary.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._io import iter_jsonl_lines, read_json

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
    summary_path, rows_path = folder / "summary.json", folder / "judgments.jsonl"
    if not folder.is_dir():
        raise InputError("not a run directory (expected judgments.jsonl and summary.json)",
                         path=folder)
    summary = read_json(summary_path)
    if not isinstance(summary, dict):
        raise InputError("summary.json must hold a JSON object", path=summary_path)
    rows = []
    for line, text in iter_jsonl_lines(rows_path):
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", path=rows_path, line=line) from None
        missing = [f for f in _ROW_FIELDS if not isinstance(row, dict) or f not in row]
        if missing:
            raise InputError("a judgment row lacks this field", path=rows_path, line=line,
                             field=missing[0])
        rows.append(row)
    if not rows:
        raise InputError("no judgment rows", path=rows_path)
    return Run(folder, summary, rows)
