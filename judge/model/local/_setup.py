"""``local setup``: the two slow, cached steps in the order a first run needs them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ._build import build_server
from ._common import console_for
from ._install import ensure_model
from ._registry import DEFAULT_MODEL


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
    console = console_for(console, progress)
    path, downloaded = ensure_model(model, cache_dir=cache_dir, progress=progress,
                                    console=console)
    server, built = build_server(cache_dir=cache_dir, portable=portable, jobs=jobs,
                                 progress=progress, console=console)
    return SetupResult(model, path, server, downloaded, built, time.monotonic() - started)
