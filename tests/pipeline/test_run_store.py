"""The run store interface: a run directory keeps the contract every store keeps
(tests/pipeline/run_store_contract.py; the service's database keeps it in
tests/service/jobs/test_job_run_log.py), and a run's environment travels as one object."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import respx

from judge import load_config
from judge._errors import OptionError
from judge.pipeline import RunDirectory, RunEnvironment, evaluate_async

from ..conftest import mount_cassette
from .run_store_contract import Place, RunStoreContract


class TestRunDirectory(RunStoreContract):
    @pytest.fixture
    def place(self, tmp_path):
        return Place(open=lambda: RunDirectory(tmp_path / "run"))


def _evaluate(example_data, **options):
    config = load_config({"model": "local", "use_cache": False, "concurrency": 2})

    async def run():
        with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
            mount_cassette(router, "example-two-dim.json")
            return await evaluate_async(config, *example_data, **options)

    return asyncio.run(run())


def test_the_environment_travels_as_one_object(example_data):
    """Callbacks and the HTTP client given in a RunEnvironment reach the run, as the keyword
    arguments of the same names do (those win when both are given)."""
    heard, progress, overridden = [], [], []
    environment = RunEnvironment(on_result=heard.append,
                                 on_progress=lambda p: progress.append(p.done))
    result = _evaluate(example_data, environment=environment)
    planned = result.summary["calls"]["planned"]
    assert len(heard) == planned == 22 and progress[-1] == planned
    _evaluate(example_data, environment=environment, on_result=overridden.append)
    assert len(overridden) == planned and len(heard) == planned  # the keyword won
    with pytest.raises(dataclasses.FrozenInstanceError):
        environment.ledger = None  # type: ignore[misc]


def test_a_run_is_kept_in_one_place(example_data, tmp_path):
    with pytest.raises(OptionError, match="out_dir or store"):
        _evaluate(example_data, out_dir=tmp_path / "a", store=RunDirectory(tmp_path / "b"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
