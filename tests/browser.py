"""Where the browser tests and the browser benchmarks find Chromium and how they start it:
Debian's package, headless, with no background traffic (Playwright's own browser download
cannot reach its host here). The one place the browser tests launch it (:func:`launched`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
INSTALL_TIMEOUT = 1200  # seconds, for apt-get update and the install together
PLAYWRIGHT_MISSING = ("the browser tests need the Python playwright package (pip install "
                      "playwright); they use Debian's Chromium, not playwright's own browser "
                      "downloads")


def install_chromium() -> None:
    """apt-get install chromium, or skip the calling test saying why that is not possible."""
    import pytest

    if shutil.which("apt-get") is None:
        pytest.skip(f"Chromium is not at {CHROMIUM} and apt-get is not available to install it "
                    "(install Debian's chromium package to run the browser tests)")
    if os.geteuid() != 0:
        pytest.skip(f"Chromium is not at {CHROMIUM}; installing it needs root "
                    "(run: apt-get update && apt-get install -y chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip(f"{' '.join(command)} did not finish within {INSTALL_TIMEOUT} s")
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            pytest.skip(f"could not install Chromium: {' '.join(command)} exited "
                        f"{done.returncode}: {' | '.join(tail)}")
    if not CHROMIUM.exists():
        pytest.skip(f"apt-get installed chromium but {CHROMIUM} is still missing")


@contextlib.contextmanager
def launched() -> Iterator[Any]:
    """A headless Chromium under playwright's sync API, closed afterwards (the test skips
    when playwright or Chromium is missing). Module-scoped at most: while the sync API is
    active, ``asyncio.run`` (the judge) cannot run in the same thread."""
    import pytest

    sync_api = pytest.importorskip("playwright.sync_api", reason=PLAYWRIGHT_MISSING)
    if not CHROMIUM.exists():
        install_chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
