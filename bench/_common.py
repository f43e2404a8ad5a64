"""Helpers the benchmark scripts share: memory readings and a proxy-free loopback."""

from __future__ import annotations

import os
import resource
import sys


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (``ru_maxrss``), in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def current_rss_mb() -> float:
    """Resident memory of this process now, in MB (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def local_only() -> None:
    """No proxy may sit between the judge and the benchmark server on 127.0.0.1."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        os.environ.pop(name, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
