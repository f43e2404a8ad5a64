"""A run exported as a bundle and imported elsewhere (issue 36):

* ``retry-errors`` on the imported run continues it on this server: it reads the project's
  files of the bundle's digests, keeps the bundle's good replies and asks the model again only
  for its error rows; without those files in the project it is refused at submission with a
  422 naming each one (it was "internal error in the server", a ``KeyError: 'schema'``);
* nothing a bundle says can make the server call an address or use a key that job creation
  would refuse: ``base_url``, ``api_key``, an unknown ``endpoint`` ... in ``bundle.json``'s
  options are refused with job creation's 422 and reason, and no job is made.

The first test runs against a real ``dst-judge serve``; the others in process."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from judge.service import create_token as make_token
from tests.conftest import EXAMPLES
from tests.fault_server import Decider, FaultConfig
from tests.service.conftest import CANARY_KEY, FINAL, Api, running_service, service_settings
from tests.service.serve_process import ServeProcess, create_token

# one server process and a handful of jobs: longer than the suite's 60 s, still finite
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]

EXAMPLE_FILES = (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                 ("predictions", "predictions.jsonl"))


def _bundle_with(bundle: bytes, **options: Any) -> bytes:
    """The bundle with ``options`` added to its ``bundle.json``'s options."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as source, \
            tarfile.open(fileobj=out, mode="w:gz") as target:
        for info in source.getmembers():
            data = source.extractfile(info).read()
            if info.name == "bundle.json":
                meta = json.loads(data)
                meta["options"] = {**meta["options"], **options}
                data = json.dumps(meta).encode()
            info.size = len(data)
            target.addfile(info, io.BytesIO(data))
    return out.getvalue()


class Http:
    """A token's requests to a real server (no proxies, a deadline on every wait)."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(base_url=url, trust_env=False, timeout=30,
                                   headers={"Authorization": f"Bearer {token}"})

    def upload_examples(self) -> dict[str, str]:
        return {kind: self.client.post("/v1/files", data={"kind": kind}, files={
            "file": (name, (EXAMPLES / name).read_bytes())}).json()["id"]
            for kind, name in EXAMPLE_FILES}

    def wait(self, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
        import time

        deadline = time.monotonic() + timeout
        while True:
            job = self.client.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in FINAL:
                return job
            assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
            time.sleep(0.1)


@pytest.fixture
def served(tmp_path, fake_model) -> Iterator[tuple[ServeProcess, Http, Http]]:
    data = tmp_path / "serve"
    lab, other = create_token(data, "lab"), create_token(data, "other")
    endpoints = {"fake": {"base_url": fake_model.url, "api_key": CANARY_KEY}}
    with ServeProcess(data, endpoints=endpoints, max_seconds=280) as server:
        first, second = Http(server.url, lab), Http(server.url, other)
        try:
            yield server, first, second
        finally:
            first.client.close()
            second.client.close()


def test_retry_errors_of_an_imported_run_asks_again_only_for_its_error_rows(served,
                                                                             fake_model):
    server, lab, other = served
    model = fake_model._server
    model.decider = Decider(FaultConfig(rates={"malformed": 0.3}, seed=3), model.stats)
    files = lab.upload_examples()
    run = lab.client.post("/v1/jobs", json={"kind": "evaluate", "inputs": files, "options": {
        "model": "fake-model", "max_retries": 0, "reasks": 0}}).json()
    run = lab.wait(run["id"])
    assert run["status"] == "succeeded" and run["exit_code"] == 1, run  # some error rows
    errors = run["headline"]["error_turns"]
    assert 0 < errors < run["headline"]["turns"], run["headline"]
    bundle = lab.client.get(f"/v1/jobs/{run['id']}/export").content
    model.decider = Decider(FaultConfig(), model.stats)  # the model answers well again

    imported = other.client.post("/v1/bundles", files={"file": ("b.tar.gz", bundle)})
    assert imported.status_code == 201, imported.text
    copy = imported.json()
    # the project has none of the run's files: refused at submission, naming them
    refused = other.client.post("/v1/jobs", json={"kind": "retry-errors",
                                                  "inputs": {"run": copy["id"]}})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["field"] == "inputs.run", error
    for name in ("schema.json", "dialogues.jsonl", "predictions.jsonl"):
        assert name in error["message"], error
    # with the same files uploaded, the retry continues the imported run
    other.upload_examples()
    asked = fake_model.snapshot()["total"]
    retry = other.client.post("/v1/jobs", json={"kind": "retry-errors",
                                                "inputs": {"run": copy["id"]}})
    assert retry.status_code == 201, retry.text
    done = other.wait(retry.json()["id"])
    assert done["status"] == "succeeded" and done["exit_code"] == 0, (done,
                                                                       server.errors())
    summary = other.client.get(f"/v1/jobs/{done['id']}/results").json()
    assert summary["error_turns"] == 0 and summary["turns"] == 11
    calls = summary["calls"]
    assert calls["resumed"] > 0 and calls["sent"] > 0, calls
    assert calls["resumed"] + calls["sent"] == calls["planned"], calls
    # only the error rows' calls reached the model (the bundle's good replies were kept)
    assert fake_model.snapshot()["total"] - asked == calls["sent"], calls
    assert "Traceback" not in server.errors(), server.errors()


@pytest.fixture
def two_projects(tmp_path, fake_model) -> Iterator[dict[str, Any]]:
    settings = service_settings(tmp_path / "data", fake_model.url)
    with running_service(settings) as (service, app):
        lab = Api(app, make_token(service.db, "lab", "read,submit")[0])
        other = Api(app, make_token(service.db, "other", "read,submit")[0])
        try:
            files = lab.upload_examples()
            run = lab.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "fake-model"}}).json()
            lab.wait(run["id"])
            bundle = lab.get(f"/v1/jobs/{run['id']}/export").content
            yield {"lab": lab, "other": other, "bundle": bundle, "service": service}
        finally:
            lab.close()
            other.close()


def _job_count(api: Api) -> int:
    return len(api.get("/v1/jobs").json()["jobs"])


@pytest.mark.parametrize(("options", "field", "reason"), [
    ({"base_url": "http://127.0.0.1:9/v1"}, "options.base_url", "cannot name a URL"),
    ({"api_key": "sk-planted"}, "options.api_key", "keys are configured on the server"),
    ({"endpoint": "elsewhere"}, "options.endpoint", "this server offers: fake, other"),
    ({"endpoint": "other"}, "options.model", "endpoint 'other' offers: allowed-model"),
    ({"rules": "/etc/passwd"}, "options.rules", "upload a rules file"),
    ({"cache_dir": "/tmp"}, "options.cache_dir", "own cache on the server"),
    ({"surprise": 1}, "options.surprise", "unknown option"),
    ({"temperature": 9}, "options.temperature", "must be a number from 0 to 2"),
])
def test_a_bundle_asking_what_job_creation_refuses_is_refused_alike(two_projects, options,
                                                                     field, reason):
    other = two_projects["other"]
    before = _job_count(other)
    refused = other.post("/v1/bundles", files={"file": (
        "b.tar.gz", _bundle_with(two_projects["bundle"], **options))})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["field"] == field and reason in error["message"], error
    assert error["message"].startswith("bundle.json: "), error
    assert _job_count(other) == before  # nothing made
    # job creation refuses the same options with the same reason
    files = other.upload_examples()
    created = other.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                           "options": {"model": "fake-model", **options}})
    assert created.status_code == 422 and created.json()["error"]["field"] == field
    assert reason in created.json()["error"]["message"]


def test_a_bundle_naming_one_of_this_servers_endpoints_runs_its_retry_there(two_projects):
    other = two_projects["other"]
    imported = other.post("/v1/bundles", files={"file": (
        "b.tar.gz", _bundle_with(two_projects["bundle"], endpoint="fake"))})
    assert imported.status_code == 201, imported.text
    job = imported.json()
    assert job["endpoint"] == "fake" and "endpoint" not in job["options"], job
    assert job["options"] == {"model": "fake-model"}


def test_a_retry_of_an_imported_run_whose_model_the_endpoint_does_not_offer_is_refused(
        tmp_path, fake_model):
    """The imported run says the exporter's model; its retry runs on this server's default
    endpoint, which offers other models: 422 at submission, as job creation would say."""
    settings = service_settings(tmp_path / "data", fake_model.url, default_endpoint="other")
    with running_service(settings) as (service, app):
        api = Api(app, make_token(service.db, "lab", "read,submit")[0])
        try:
            files = api.upload_examples()
            run = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "allowed-model"}}).json()
            api.wait(run["id"])
            bundle = api.get(f"/v1/jobs/{run['id']}/export").content
            copy = api.post("/v1/bundles", files={"file": (
                "b.tar.gz", _bundle_with(bundle, model="fake-model"))}).json()
            refused = api.post("/v1/jobs", json={"kind": "retry-errors",
                                                 "inputs": {"run": copy["id"]}})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["field"] == "inputs.run"
            message = refused.json()["error"]["message"]
            assert "cannot ask: endpoint 'other' offers: allowed-model" in message, message
            accepted = api.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {
                "run": api.post("/v1/bundles", files={"file": ("b.tar.gz", bundle)}).json()[
                    "id"]}})
            assert accepted.status_code == 201, accepted.text
            assert api.wait(accepted.json()["id"])["status"] == "succeeded"
        finally:
            api.close()
