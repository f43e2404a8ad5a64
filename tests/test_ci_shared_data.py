"""The CI guard in conftest: with ``CI`` set and ../shared/data present, a shared-data test
that skips is a failure; anywhere else it stays a skip."""

from __future__ import annotations

import pytest

from . import conftest

INNER_CONFTEST = "from tests.conftest import pytest_runtest_makereport  # noqa: F401\n"
INNER_TESTS = '''
import pytest

from tests.conftest import shared_path


@pytest.fixture(scope="module")
def shared_schema():
    return shared_path("multiwoz", "no-such-file.json")


def test_needs_shared_data_in_the_body():
    shared_path("multiwoz", "no-such-file.json")


def test_needs_shared_data_in_a_fixture(shared_schema):
    assert shared_schema


def test_skips_for_another_reason():
    pytest.skip("unrelated to the shared data")
'''


@pytest.fixture
def inner(pytester, monkeypatch, tmp_path):
    """Run the inner tests with a given CI value and with or without a shared data folder."""
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)

    def run(ci: str | None, shared_present: bool) -> pytest.RunResult:
        shared = tmp_path / "shared" / "data"
        if shared_present:
            shared.mkdir(parents=True, exist_ok=True)
        monkeypatch.setattr(conftest, "SHARED_DATA", shared)
        if ci is None:
            monkeypatch.delenv("CI", raising=False)
        else:
            monkeypatch.setenv("CI", ci)
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA")

    return run


def test_in_ci_with_shared_data_present_a_shared_skip_fails(inner):
    result = inner("true", shared_present=True)
    result.assert_outcomes(passed=0, failed=1, errors=1, skipped=1)
    for line in ("FAILED test_inner.py::test_needs_shared_data_in_the_body - CI is set *",
                 "ERROR test_inner.py::test_needs_shared_data_in_a_fixture - CI is set *",
                 "SKIPPED * unrelated to the shared data"):
        result.stdout.fnmatch_lines([line])
    assert "this shared-data test skipped: Skipped: shared data not available" in str(result.stdout)


@pytest.mark.parametrize(("ci", "shared_present"), [
    ("true", False),  # CI on a clone without ../shared: nothing to check against
    (None, True)])  # a developer's run: skipping is allowed
def test_elsewhere_shared_skips_stay_skips(inner, ci, shared_present):
    inner(ci, shared_present).assert_outcomes(passed=0, failed=0, errors=0, skipped=3)


@pytest.mark.parametrize(("value", "on"), [("true", True), ("1", True), ("yes", True),
                                           ("", False), ("0", False), ("false", False),
                                           ("False", False), ("no", False)])
def test_ci_variable_values(monkeypatch, value, on):
    monkeypatch.setenv("CI", value)
    assert conftest._in_ci() is on
