"""What a run that judged nothing, and its retry, promise: the run fails with exit 4 and the
model's reasons; ``retry-errors`` asks the model again (it does not reuse the broken replies
the ledger holds) and carries the first run's manifest; an endpoint that replays cassettes
gets one shared replay transport, and only it."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from judge.model import ReplayTransport
from judge.service import build_settings
from judge.service.ledger._replaying import replay_transport_for
from tests.fault_server import Decider, FaultConfig

CASSETTE = str(Path(__file__).resolve().parents[3] / "cassettes" / "example-two-dim.json")


def test_a_run_that_judged_nothing_fails_and_its_retry_asks_the_model_again(service_env):
    api, files, model = service_env["api"], service_env["files"], service_env["model"]
    server = model._server
    server.decider = Decider(FaultConfig(rates={"malformed": 1.0}), server.stats)
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "fake-model"}}).json()
    failed = api.wait(job["id"])
    assert failed["status"] == "failed" and failed["exit_code"] == 4, failed
    assert failed["error"].startswith("nothing could be judged: "), failed["error"]
    assert len(failed["error"]) > len("nothing could be judged: "), failed["error"]
    asked = model.snapshot()["total"]
    assert model.snapshot()["by_kind"]["malformed"] > 0

    server.decider = Decider(FaultConfig(), server.stats)  # the model works again
    retry = api.post("/v1/jobs", json={"kind": "retry-errors",
                                       "inputs": {"run": job["id"]}}).json()
    done = api.wait(retry["id"])
    assert done["status"] == "succeeded", done
    # asked again, not answered from the ledger's broken replies
    assert model.snapshot()["total"] > asked and model.snapshot()["completed"] > 0
    rows = [json.loads(line) for line in
            api.get(f"/v1/jobs/{retry['id']}/judgments").text.splitlines()]
    assert rows and not any(row.get("error") for row in rows), rows[:2]
    # the retry carries the first run's manifest: its bundle is a whole run
    bundle = api.get(f"/v1/jobs/{retry['id']}/export")
    with tarfile.open(fileobj=io.BytesIO(bundle.content), mode="r:gz") as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert manifest["config"]["model"] == "fake-model", manifest


@pytest.fixture
def replay_settings(tmp_path):
    return build_settings({"data_dir": tmp_path, "endpoints": {
        "recorded": {"base_url": "http://127.0.0.1:9/v1", "replay": CASSETTE},
        "live": {"base_url": "http://127.0.0.1:9/v1"}}, "default_endpoint": "live"})


def test_only_a_replaying_endpoint_gets_a_replay_transport_and_shares_it(replay_settings):
    first = replay_transport_for(replay_settings, "recorded")
    assert isinstance(first, ReplayTransport)
    assert replay_transport_for(replay_settings, "recorded") is first  # one per cassette
    assert replay_transport_for(replay_settings, "live") is None
    assert replay_transport_for(replay_settings, "no-such-endpoint") is None
