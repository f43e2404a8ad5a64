"""Small helpers every local step shares: where progress goes, log tails, timestamps and
atomic JSON writes (so an interrupted step never leaves a half-written marker behind)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from ..._io import replace_whole


def console_for(console: Console | None, progress: bool) -> Console | None:
    """Progress goes to stderr by default so stdout stays clean for scripts."""
    if console is None and progress:
        return Console(stderr=True)
    return console


def say(console: Console | None, message: str) -> None:
    """One line of progress, when there is a console to print it on."""
    if console is not None:
        console.print(message, highlight=False, markup=False)  # paths may hold "["


def progress_bar(console: Console | None, enabled: bool, *columns: Any) -> Progress:
    """A transient bar that stays silent without a console or when progress is off."""
    return Progress(*columns, console=console, transient=True,
                    disable=not enabled or console is None)


def bytes_columns(label: str) -> tuple[Any, ...]:
    """Columns of a bar that counts bytes (download, hash, assembly)."""
    return (TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            TimeRemainingColumn())


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a log, for error messages that point at the cause."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty log)"


def now() -> str:
    """UTC timestamp, to the second, for state and marker files."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` next to ``path`` and rename it into place."""
    text = json.dumps(data, indent=2) + "\n"
    replace_whole(path, lambda part: part.write_text(text, encoding="utf-8"))
