"""Paid replies are shared through the ledger in the service database: two jobs of a project
sending identical requests at the same moment pay once (in one replica, and across two replicas
on one Postgres); a job of another project pays again unless the operator shares replies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.service import create_token
from tests.fault_server import FaultConfig, FaultServer
from tests.service.conftest import Api, running_service, service_settings

DISTINCT = 22  # requests of one evaluation of the examples


@pytest.fixture
def slow_model() -> Iterator[FaultServer]:
    """Slow enough that the requests of jobs started together overlap on the wire."""
    with FaultServer(FaultConfig(latency=0.15)) as server:
        yield server


@contextlib.contextmanager
def _replicas(folder: Path, model_url: str, count: int, **values: Any) -> Iterator[list[Any]]:
    """``count`` replicas on one database, each with a data directory of its own (as on
    machines of their own: nothing but the database is shared)."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_service(
            service_settings(folder / f"replica-{n}", model_url, **values)))
            for n in range(count)]


def _api(service: Any, app: Any, project: str) -> Api:
    api = Api(app, create_token(service.db, project, "read,submit", name=project)[0])
    api.files = api.upload_examples()
    return api


def _submit(api: Api) -> str:
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": api.files,
                                          "options": {"model": "fake-model"}})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _together(api: Api, count: int = 2) -> list[dict[str, Any]]:
    """Submit ``count`` identical jobs at once; their runs must overlap in time."""
    ids = [_submit(api) for _ in range(count)]
    done = [api.wait(job_id, timeout=60) for job_id in ids]
    assert all(j["status"] == "succeeded" and j["exit_code"] == 0 for j in done), done
    assert max(j["started_at"] for j in done) < min(j["finished_at"] for j in done)
    return done


@pytest.mark.parametrize("shared", [False, True], ids=["per-project", "shared"])
def test_identical_jobs_at_once_pay_once_per_project(tmp_path: Path, slow_model: FaultServer,
                                                    shared: bool):
    settings = service_settings(tmp_path / "data", slow_model.url,
                                share_cache_across_projects=shared)
    with running_service(settings) as (service, app):
        lab, other = _api(service, app, "lab"), _api(service, app, "other")
        try:
            jobs = _together(lab)
            paid = slow_model.snapshot()
            assert paid["distinct_bodies"] == DISTINCT
            assert paid["completed"] == DISTINCT and paid["max_completed_per_body"] == 1
            assert sum(j["progress"]["cache_hits"] for j in jobs) == DISTINCT
            elsewhere = _together(other, 1)[0]
        finally:
            lab.close()
            other.close()
    after = slow_model.snapshot()
    if shared:  # the operator shares replies: the other project's job pays nothing
        assert after["completed"] == DISTINCT
        assert elsewhere["progress"]["cache_hits"] == DISTINCT
    else:  # isolation: the other project pays for its own requests
        assert after["completed"] == 2 * DISTINCT and after["max_completed_per_body"] == 2
        assert elsewhere["progress"]["cache_hits"] == 0


def test_two_replicas_on_postgres_pay_once_for_jobs_sent_together(
        tmp_path: Path, slow_model: FaultServer, postgres_db: str):
    # one job slot per replica: the two jobs run on the two replicas
    with _replicas(tmp_path, slow_model.url, 2, db=postgres_db, job_slots=1) as replicas:
        service, app = replicas[0]
        api = _api(service, app, "lab")
        try:
            jobs = _together(api)
        finally:
            api.close()
    assert len({j["progress"]["worker"] for j in jobs}) == 2  # each replica ran one
    paid = slow_model.snapshot()
    assert paid["completed"] == DISTINCT and paid["max_completed_per_body"] == 1
