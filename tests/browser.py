"""Where the browser tests and the browser benchmarks find Chromium and how they start it:
Debian's package, headless, with no background traffic (Playwright's own browser download
cannot reach its host here)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
