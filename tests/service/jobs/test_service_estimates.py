"""The service's agreement job with a sample file: the judge, labels-only and PPI estimates,
and clear refusals of a bad sample upload or tuning option."""

from __future__ import annotations

import json

from judge.analysis import draw_sample, write_sample


def _evaluate(env):
    api, files = env["api"], env["files"]
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                          "options": {"model": "fake-model"}})
    assert response.status_code == 201, response.text
    return api.wait(response.json()["id"])


def test_agreement_job_with_a_sample_reports_the_estimates(service_env, tmp_path):
    api = service_env["api"]
    run = _evaluate(service_env)
    rows = [json.loads(line) for line in
            api.get(f"/v1/jobs/{run['id']}/judgments").text.splitlines()]
    sample = draw_sample(rows, n=6, design="random", seed=1)
    sample_path = tmp_path / "sample.jsonl"
    write_sample(sample, sample_path)
    uploaded = api.upload(sample_path, "sample")
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["info"]["design"] == "random"
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"dialogue_id": t.dialogue_id,
                                          "turn_index": t.turn_index,
                                          "label": int(t.turn_index % 2 == 0)}) + "\n"
                              for t in sample.turns))
    human = api.upload(labels, "labels").json()["id"]
    job = api.post("/v1/jobs", json={
        "kind": "agreement",
        "inputs": {"run": run["id"], "human": human, "sample": uploaded.json()["id"]},
        "options": {"n_boot": 0, "tuning": "plain"}}).json()
    done = api.wait(job["id"])
    assert done["status"] == "succeeded", done
    tsa = api.get(f"/v1/jobs/{job['id']}/results").json()["population"]["estimates"]["tsa"]
    assert tsa["judge"]["ci"] is None and tsa["labels"]["n_labelled"] == 6
    expected = 100 * sum(t.turn_index % 2 == 0 for t in sample.turns) / 6
    assert abs(tsa["labels"]["value"] - expected) < 1e-9
    assert tsa["ppi"]["tuning"] == "plain"


def test_bad_sample_and_tuning_are_refused(service_env, tmp_path):
    api = service_env["api"]
    bad = tmp_path / "sample.jsonl"
    bad.write_text(json.dumps({"dialogue_id": "EX001.json", "turn_index": 0}) + "\n")
    response = api.upload(bad, "sample")
    assert response.status_code == 422 and "Traceback" not in response.text
    response = api.post("/v1/jobs", json={"kind": "agreement", "inputs": {"run": "job_x"},
                                          "options": {"tuning": "best"}})
    assert response.status_code == 422
    assert "options.tuning" in response.text
