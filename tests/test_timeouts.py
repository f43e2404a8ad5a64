"""No test run can hang: pytest-timeout is configured for the whole suite (pyproject.toml), and
inner pytest sessions show that a test waiting for ever is failed by it, with the stack of the
wait, well within a minute, and that the run still ends with its summary: in parallel the
thread method ends only the worker, which xdist reports and replaces; a serial run uses the
signal method (tests/conftest.py)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HANGING = """
import threading

def test_waits_for_ever():
    threading.Event().wait()  # nobody sets it: a planted infinite wait

def test_runs_after_the_hang():
    assert True
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


GROUPED = """
import threading, time
import pytest

@pytest.mark.parametrize("n", range(6))
def test_before(n):
    time.sleep(0.1)

@pytest.mark.xdist_group("servers")
@pytest.mark.parametrize("n", range(3))
def test_grouped(n):
    time.sleep(0.1)

def test_waits_for_ever():
    threading.Event().wait()  # nobody sets it: a planted infinite wait

@pytest.mark.parametrize("n", range(6))
def test_after(n):
    time.sleep(0.1)
"""
SCHEDULER = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import pytest_xdist_make_scheduler  # the suite's own scheduling
"""


@pytest.mark.timeout(300)  # an inner parallel run: workers start, one is ended and replaced
def test_a_timeout_under_xdist_ends_only_its_worker_and_the_run_has_its_summary(pytester):
    """Under xdist (the suite's options: loadgroup, tests/scheduling.py) the thread method
    ends only the worker of the test (os._exit): the controller reports that test as failed
    once, a new worker runs the rest, and the run ends with its summary (issue 36 item 13: a
    timeout ended a serial run without one; xdist's own group scheduling hangs instead)."""
    options = _pytest_options()
    pytester.makeini(f"[pytest]\ntimeout_method = {options['timeout_method']}\n")
    pytester.makeconftest(SCHEDULER)
    pytester.makepyfile(test_hang=GROUPED)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--timeout", "10",
                                           "-p", "no:cacheprovider", timeout=240)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert re.search(r"\b1 failed, 15 passed\b", output), output  # the summary line
    assert "crashed while running" in output and "test_waits_for_ever" in output, output


def test_a_serial_run_of_the_suite_times_out_with_the_signal_method(request):
    """``-n 0`` (no workers): the thread method would end the whole run, so the suite's
    conftest switches to the signal method, which fails the test and goes on."""
    import pytest_timeout

    method = request.config._env_timeout_method  # what pytest-timeout uses for this session
    workers = getattr(request.config.option, "dist", "no") != "no"
    if hasattr(request.config, "workerinput") or workers:
        assert method == pytest_timeout.get_env_settings(request.config).method == "thread"
    else:
        assert method == "signal"
