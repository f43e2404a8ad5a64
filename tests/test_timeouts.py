"""No test run can hang: pytest-timeout is configured for the whole suite (pyproject.toml), and
an inner pytest session shows that a test waiting for ever is failed by it, with the stack of
the wait, well within a minute, while the session goes on to report it."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HANGING = """
import threading

def test_waits_for_ever():
    threading.Event().wait()  # nobody sets it: a planted infinite wait
"""


def _pytest_options() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "pytest"]["ini_options"]


def test_the_suite_has_a_global_timeout_that_also_ends_waits_outside_python():
    options = _pytest_options()
    assert 0 < int(options["timeout"]) <= 60, options.get("timeout")
    # the thread method ends a wait in C code or in another thread, which signals cannot
    assert options["timeout_method"] == "thread"


def test_longer_bounds_are_few_and_finite():
    """Tests that start server processes may take a longer bound (their own waits have
    deadlines with messages); every such bound is still finite and at most ten minutes."""
    marks = [(path.relative_to(ROOT), int(bound)) for path in (ROOT / "tests").rglob("*.py")
             for bound in re.findall(r"mark\.timeout\((\d+)\)",
                                     path.read_text(encoding="utf-8"))]
    assert marks, "no longer bound found: the scan is broken"
    assert all(0 < bound <= 600 for _, bound in marks), marks


def test_a_test_waiting_for_ever_fails_within_a_minute(pytester):
    options = _pytest_options()
    pytester.makeini(f"[pytest]\ntimeout_method = {options['timeout_method']}\n")
    pytester.makepyfile(test_hang=HANGING)
    started = time.monotonic()
    # a subprocess: the thread method ends the whole inner process, as it would a CI run
    result = pytester.runpytest_subprocess("--timeout", "10", "-p", "no:cacheprovider",
                                           timeout=90)
    elapsed = time.monotonic() - started
    output = result.stdout.str() + result.stderr.str()
    assert elapsed < 60, f"the hanging test took {elapsed:.0f} s to fail"
    assert result.ret != 0
    assert "Timeout" in output, output
    assert "test_waits_for_ever" in output and "threading.Event().wait()" in output, output
