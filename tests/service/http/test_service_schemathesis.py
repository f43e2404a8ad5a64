"""Schemathesis against a real ``dst-judge serve`` process, as an integrator would run it: every
phase and every check (configuration: ``schemathesis.toml`` beside this file), once with an
admin token, once with a read-only token and once with none. No response may carry an
undocumented status or content type, violate its schema, be a 5xx, or be a 405 without
``Allow``; every operation of the document is exercised."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the test extra")

from schemathesis.engine import events, from_schema  # noqa: E402

from tests.conftest import EXAMPLES  # noqa: E402
from tests.fault_server import FaultConfig, ServerProcess  # noqa: E402
from tests.service.http.test_service_openapi import OPERATIONS  # noqa: E402
from tests.service.serve_process import ServeProcess, create_token  # noqa: E402

CONFIG = Path(__file__).with_name("schemathesis.toml")
NO_RATE_LIMITS = ["--requests-per-minute", "0", "--auth-failures-per-minute", "0"]
"""The fuzzer sends hundreds of requests a minute, most of the no-token run's failing
authentication: with the limits on, they become 429s (documented, but they hide what the
fuzzer meant to test). The limits themselves are tested by the hostile-request suite."""


pytestmark = pytest.mark.servers


@dataclass
class Run:
    operations: set[str] = field(default_factory=set)
    cases: int = 0
    by_phase: collections.Counter[str] = field(default_factory=collections.Counter)
    phases: dict[str, str] = field(default_factory=dict)
    failures: collections.Counter[tuple[str, str, str, str]] = field(
        default_factory=collections.Counter)
    errors: list[str] = field(default_factory=list)

    def figures(self) -> str:
        return (f"{len(self.operations)} operations, {self.cases} cases "
                f"({dict(self.by_phase)}), {sum(self.failures.values())} failures")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, dict[str, str | None]]]:
    data = tmp_path_factory.mktemp("schemathesis") / "serve"
    tokens = {"admin": create_token(data, "lab", "admin"),
              "read": create_token(data, "lab", "read"), "none": None}
    with ServerProcess(FaultConfig(latency=0.0), max_seconds=900) as model, \
            ServeProcess(data, endpoints={"fake": {"base_url": model.url}}, max_seconds=900,
                         args=NO_RATE_LIMITS) as serve:
        yield serve.url, tokens
        assert "Traceback" not in serve.errors(), serve.errors()


def _finished_job(url: str, token: str) -> str:
    """A finished job of the project (a metrics job: it needs no model)."""
    with httpx.Client(base_url=url, trust_env=False, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        files = {kind: client.post("/v1/files", data={"kind": kind}, files={
            "file": (name, (EXAMPLES / name).read_bytes())}).json()["id"]
            for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                               ("predictions", "predictions.jsonl"))}
        job = client.post("/v1/jobs", json={"kind": "metrics", "inputs": {
            **files, "predictions": [files["predictions"]]}}).json()
        deadline = time.monotonic() + 120
        while client.get(f"/v1/jobs/{job['id']}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline, f"job {job['id']} did not succeed"
            time.sleep(0.1)
        return str(job["id"])


@pytest.mark.timeout(300)
def test_schemathesis_finds_the_events_of_a_job_stream_as_documented(server):
    """Issue 36: schemathesis found each event of a job's stream carrying a JSON job where the
    document said a string. The fuzzer's generated ids name no job (its stream answers 404),
    so the stream of a real finished job is checked here, with every check schemathesis has
    (before the admin token's run, which may revoke tokens)."""
    url, tokens = server
    token = str(tokens["admin"])
    job_id = _finished_job(url, token)
    config = schemathesis.Config.from_str(
        f'headers = {{ Authorization = "Bearer {token}" }}\n' + CONFIG.read_text("utf-8"))
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    case = schema["/v1/jobs/{job_id}/events"]["GET"].Case(
        path_parameters={"job_id": job_id}, headers={"Authorization": f"Bearer {token}"})
    response = case.call()
    assert response.status_code == 200 and "event: end" in response.text, response.text[:300]
    case.validate_response(response)  # raises, naming the check, when one fails


def run_schemathesis(url: str, token: str | None) -> Run:
    text = CONFIG.read_text(encoding="utf-8")
    if token is not None:  # a top-level key: before the file's first table
        text = f'headers = {{ Authorization = "Bearer {token}" }}\n' + text
    config = schemathesis.Config.from_str(text)
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)
    run = Run()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            if event.phase.value != "stateful":
                run.operations.add(recorder.label)
            run.cases += len(recorder.cases)
            run.by_phase[event.phase.value] += len(recorder.cases)
            for checks in recorder.checks.values():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        run.failures[(event.phase.value, recorder.label, check.name,
                                      f"{failure.title}: {failure.message}"[:300])] += 1
        elif isinstance(event, events.PhaseFinished):
            run.phases[event.phase.name.value] = event.status.value
        elif isinstance(event, events.NonFatalError | events.FatalError):
            run.errors.append(str(getattr(event, "value", None) or event.exception))
    return run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("who", ["admin", "read", "none"])
def test_schemathesis_finds_nothing(server, who):
    url, tokens = server
    run = run_schemathesis(url, tokens[who])
    print(f"schemathesis with token {who}: {run.figures()}; phases {run.phases}")
    assert not run.errors, run.errors
    assert not run.failures, "\n".join(f"{n} × {key}" for key, n in run.failures.items())
    assert len(run.operations) == len(OPERATIONS), sorted(run.operations)
    assert run.cases > len(OPERATIONS) * 4
    for phase in ("examples", "coverage", "fuzzing"):
        assert run.phases.get(phase) in ("success", "skip"), run.phases
    assert run.phases.get("stateful") == "success", run.phases
    assert run.by_phase["stateful"] > 0  # the links were followed
