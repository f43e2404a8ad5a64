"""The service's upload records the predicted slot names of a predictions file, and the job
that pairs it with a schema answers with a warning naming those outside the schema and the
closest schema slot (the job is queued all the same)."""

from __future__ import annotations

from tests.conftest import SLOT_NOT_IN_SCHEMA, predictions_with_slot_errors


def test_an_evaluate_job_warns_about_slot_names_outside_its_schema(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    record = api.get(f"/v1/files/{files['predictions']}").json()
    assert record["info"]["slot_names"]["train-leaveat"] == 1
    typo = predictions_with_slot_errors(tmp_path / "typo.jsonl").read_bytes()
    uploaded = api.upload(tmp_path / "typo.jsonl", "predictions", content=typo)
    assert uploaded.status_code == 201
    response = api.post("/v1/jobs", json={
        "kind": "evaluate", "options": {"model": "m"},
        "inputs": {"schema": files["schema"], "dialogues": files["dialogues"],
                   "predictions": uploaded.json()["id"]}})
    assert response.status_code == 201, response.text  # a warning, not a refusal
    (warning,) = response.json()["warnings"]
    slots = {s["slot"]: s for s in warning["slots"]}
    assert slots["hotel-pricerang"]["suggestion"] == "hotel-pricerange"
    assert slots["hotel-pricerang"]["turns"] >= 1 and slots[SLOT_NOT_IN_SCHEMA]["turns"] == 1
    assert "typo.jsonl: 2 predicted slot names outside the schema" in warning["message"]
    assert "closest schema slot: hotel-pricerange" in warning["message"]
    assert api.wait(response.json()["id"])["status"] == "succeeded"
    metrics = api.post("/v1/jobs", json={
        "kind": "metrics", "inputs": {"schema": files["schema"],
                                      "dialogues": files["dialogues"],
                                      "predictions": [files["predictions"],
                                                      uploaded.json()["id"]]}})
    assert metrics.status_code == 201
    # the example's own predictions draw no warning; the planted file's do
    (warning,) = metrics.json()["warnings"]
    assert [s["slot"] for s in warning["slots"]] == ["hotel-pricerang", SLOT_NOT_IN_SCHEMA]
