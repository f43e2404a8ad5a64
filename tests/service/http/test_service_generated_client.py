"""A client generated from the served ``/openapi.json`` by a standard generator
(openapi-python-client), imported as generated (no hand edits), runs upload → submit → poll →
results → judgments against a real ``dst-judge serve`` and a fake model; its Job model has a
typed status and a typed progress."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest

pytest.importorskip("openapi_python_client", reason="openapi-python-client is in the test extra")

from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, ServerProcess
from tests.service.serve_process import ServeProcess, create_token

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers, pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="the code openapi-python-client generates imports typing.Self (Python 3.11+)")]

PACKAGE = "dst_judge_generated_api"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Iterator[tuple[str, str, ModuleType]]:
    """A live server, a token, and the client package generated from the server's document."""
    tmp_path = tmp_path_factory.mktemp("generated-client")
    data = tmp_path / "serve"
    token = create_token(data, "lab", "read,submit")
    with ServerProcess(FaultConfig(latency=0.0), max_seconds=300) as model, \
            ServeProcess(data, endpoints={"fake": {"base_url": model.url}}) as server:
        document = httpx.get(f"{server.url}/openapi.json", trust_env=False).json()
        spec = tmp_path / "openapi.json"
        spec.write_text(json.dumps(document), encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "openapi_python_client", "generate",
                               "--path", str(spec), "--meta", "none", "--output-path",
                               str(tmp_path / PACKAGE)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        sys.path.insert(0, str(tmp_path))
        try:
            yield server.url, token, importlib.import_module(PACKAGE)
        finally:
            sys.path.remove(str(tmp_path))
            for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
                del sys.modules[name]


def _module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


def test_a_generated_client_runs_a_whole_evaluation(generated):
    url, token, package = generated
    models, types = _module("models"), _module("types")
    upload_file, create_job, get_job = (_module(f"api.{path}") for path in (
        "files.upload_file", "jobs.create_job", "jobs.get_job"))
    get_job_results, list_job_judgments = (_module(f"api.results.{name}") for name in (
        "get_job_results", "list_job_judgments"))
    client = package.AuthenticatedClient(base_url=url, token=token,
                                         httpx_args={"trust_env": False})

    ids = {}
    for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                       ("predictions", "predictions.jsonl")):
        with (EXAMPLES / name).open("rb") as handle:
            body = models.BodyUploadFile(file=types.File(payload=handle, file_name=name),
                                         kind=models.BodyUploadFileKind(kind))
            uploaded = upload_file.sync(client=client, body=body)
        assert isinstance(uploaded, models.UploadedFile), uploaded
        assert uploaded.kind.value == kind
        ids[kind] = uploaded.id

    request = models.JobRequest(kind=models.JobRequestKind.EVALUATE,
                                inputs=models.EvaluateInputs.from_dict(ids),
                                options=models.EvaluateOptions(model="m"))
    created = create_job.sync(client=client, body=request)
    assert isinstance(created, models.CreatedJob), created
    assert created.status.value == "queued"
    # the example's predictions name a slot outside its schema: a typed warning, not a refusal
    assert all(isinstance(w, models.JobWarning) for w in created.warnings)

    final = {"succeeded", "failed", "cancelled", "stopped"}
    job = get_job.sync(created.id, client=client)
    deadline = time.monotonic() + 120
    while job.status.value not in final:
        assert time.monotonic() < deadline, f"job still {job.status} after 120 s"
        time.sleep(0.2)
        job = get_job.sync(created.id, client=client)
        assert isinstance(job, models.Job), job
    assert job.status is models.JobStatus.SUCCEEDED, job
    assert isinstance(job.progress, models.JobProgress)
    assert job.progress.done == job.progress.total == 22
    assert isinstance(job.progress.cost_usd, float)
    assert isinstance(job.headline, models.Headline) and job.headline.turns == 11

    summary = get_job_results.sync(job.id, client=client)
    assert summary.additional_properties["turns"] == 11
    assert summary.additional_properties["tsa"] == job.headline.tsa

    answer = list_job_judgments.sync_detailed(job.id, client=client, dialogue_id=None)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in answer.content.decode("utf-8").splitlines()]
    assert len(rows) == 11 and {"dialogue_id", "turn_index", "verdict"} <= set(rows[0])

    missing = get_job.sync("job_nope", client=client)  # errors are typed too
    assert isinstance(missing, models.Error) and missing.error.status == 404


def test_the_generated_job_model_has_typed_status_and_progress(generated):
    _, _, package = generated
    models = _module("models")
    fields = {f.name: f.type for f in package.models.Job.__attrs_attrs__}
    assert fields["status"] in ("JobStatus", models.JobStatus)
    assert fields["progress"] in ("JobProgress", models.JobProgress)
    assert {s.value for s in models.JobStatus} == {"queued", "running", "waiting", "succeeded",
                                                   "failed", "cancelled", "stopped"}
    progress = {f.name for f in models.JobProgress.__attrs_attrs__}
    assert {"total", "done", "errors", "tokens", "cost_usd", "eta_seconds"} <= progress
