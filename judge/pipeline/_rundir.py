"""A run directory that survives interruptions: an append-only log of finished calls and a
manifest of everything the answers depend on.

Each finished call is appended to ``calls.jsonl`` and flushed before the next one is started, so
Ctrl-C or ``kill -9`` loses at most calls in flight. ``--resume`` reuses every logged call (none
is sent again) after checking that the manifest still matches: data files, options that shape
the answers, template hashes and rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from .._errors import OptionError
from .._io import iter_jsonl_lines

RUN_LOG = "calls.jsonl"
MANIFEST = "manifest.json"
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
        if not self.manifest_path.is_file():
            return None
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

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
