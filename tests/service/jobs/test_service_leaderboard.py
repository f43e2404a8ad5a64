"""The ``leaderboard`` job kind over the API: the same JSON as the library on the same inputs
(predictions files and a judge run, mixed), bad input refused with a JSON path before anything
is queued, and another project's token sees nothing of the job."""

from __future__ import annotations

import json

import pytest

from judge import MetricOptions, load_dialogues, load_predictions, load_schema
from judge.analysis import Layout, build_leaderboard, score_predictions
from tests.conftest import EXAMPLES


def _submit(api, inputs, options=None, token=None):
    return api.post("/v1/jobs", token=token, json={"kind": "leaderboard", "inputs": inputs,
                                                   "options": options or {}})


def _systems(service_env):
    api, files = service_env["api"], service_env["files"]
    weak = api.upload(EXAMPLES / "predictions-weak.jsonl", "predictions").json()["id"]
    return api, files, [files["predictions"], weak]


def _library(versions, names, confidence=0.95, correction="holm"):
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=schema)
    options = MetricOptions(per_dialogue=False, breakdowns=False)
    systems = [score_predictions(dialogues, load_predictions(EXAMPLES / f, dialogues, schema),
                                 schema, versions=versions, options=options, name=name)
               for f, name in zip(("predictions.jsonl", "predictions-weak.jsonl"), names,
                                  strict=True)]
    return build_leaderboard(Layout.of(dialogues, schema, versions,
                                       separator=schema.multi_value_separator),
                             systems, options=options, confidence=confidence,
                             correction=correction).to_json()


def _comparable(board):
    """The figures: everything but where each system came from and how the files were read."""
    out = {k: v for k, v in board.items() if k not in ("method", "corrections")}
    out["systems"] = [{k: v for k, v in s.items() if k != "source"} for s in board["systems"]]
    out["method"] = {k: v for k, v in board["method"].items() if k not in ("reading",
                                                                           "options")}
    return out


def test_the_job_returns_the_library_json(service_env):
    api, files, systems = _systems(service_env)
    job = _submit(api, {"systems": systems, "schema": files["schema"],
                        "dialogues": files["dialogues"]},
                  {"gold": ["2.1", "2.4"], "names": ["strong", "weak"], "confidence": 0.9,
                   "correction": "by"})
    assert job.status_code == 201, job.text
    done = api.wait(job.json()["id"], timeout=60)
    assert done["status"] == "succeeded", done
    board = api.get(f"/v1/jobs/{done['id']}/results").json()
    expected = _library(["2.1", "2.4"], ["strong", "weak"], confidence=0.9, correction="by")
    assert _comparable(board) == _comparable(expected)
    assert [s["source"] for s in board["systems"]] == [
        {"strong": systems[0], "weak": systems[1]}[s["name"]] for s in board["systems"]]
    assert board["method"]["correction"] == "by" and board["pairs"]


def test_a_judge_run_and_a_predictions_file_mixed(service_env):
    api, files, systems = _systems(service_env)
    run = api.evaluated(files)
    job = _submit(api, {"systems": [run, systems[1]], "schema": files["schema"],
                        "dialogues": files["dialogues"]}, {"breakdowns": False})
    assert job.status_code == 201, job.text
    done = api.wait(job.json()["id"], timeout=60)
    assert done["status"] == "succeeded", done
    board = api.get(f"/v1/jobs/{done['id']}/results").json()
    kinds = {s["source"]: s["kind"] for s in board["systems"]}
    assert kinds == {run: "run", systems[1]: "predictions"}
    judged = next(s for s in board["systems"] if s["kind"] == "run")
    assert "tsa" in judged["metrics"] and "judge_jga" in judged["metrics"]
    assert board["breakdowns"] == []
    # the run's exact-match figures are its predictions file's, scored by the library
    alone = _library(["2.1"], ["example-dst", "weak"])
    assert judged["metrics"]["jga"] == next(
        s for s in alone["systems"] if s["name"] == "example-dst")["metrics"]["jga"]


@pytest.mark.parametrize(("inputs", "options", "field"), [
    ({"systems": ["P"]}, {}, "inputs.systems"),
    ({"systems": ["P", "P"]}, {}, "inputs.systems[1]"),
    ({"systems": ["P", "W"]}, {"confidence": 1.5}, "options.confidence"),
    ({"systems": ["P", "W"]}, {"confidence": 0.3}, "options.confidence"),
    ({"systems": ["P", "W"]}, {"confidence": "0.9"}, "options.confidence"),
    ({"systems": ["P", "W"]}, {"correction": "bonferroni"}, "options.correction"),
    ({"systems": ["P", "W"]}, {"names": ["a"]}, "options.names"),
    ({"systems": ["P", "W"]}, {"names": ["a", "b", "c"]}, "options.names"),
    ({"systems": ["P", "W"]}, {"names": ["a", "a"]}, "options.names[1]"),
    ({"systems": ["P", "W"]}, {"names": ["a", 3]}, "options.names[1]"),
    ({"systems": ["P", "W"]}, {"gold": "2.1"}, "options.gold"),
    ({"systems": ["P", "W"]}, {"gold": []}, "options.gold"),
    ({"systems": ["P", "W"]}, {"breakdowns": "yes"}, "options.breakdowns"),
    ({"systems": ["P", "W"]}, {"seed": 3}, "options.seed"),
    ({"systems": ["P", "job_0000000000000000"]}, {}, "inputs.systems[1]"),
    ({"systems": ["P", "file_0000000000000000"]}, {}, "inputs.systems[1]"),
    ({"systems": ["P", "S"]}, {}, "inputs.systems[1]"),
])
def test_bad_input_is_422_with_a_json_path(service_env, inputs, options, field):
    api, files, systems = _systems(service_env)
    ids = {"P": systems[0], "W": systems[1], "S": files["schema"]}
    body = {"systems": [ids.get(s, s) for s in inputs["systems"]], "schema": files["schema"],
            "dialogues": files["dialogues"]}
    before = len(api.get("/v1/jobs").json()["jobs"])
    response = _submit(api, body, options)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field, response.json()
    assert len(api.get("/v1/jobs").json()["jobs"]) == before


def test_missing_dialogues_input_and_nan(service_env):
    api, files, systems = _systems(service_env)
    response = _submit(api, {"systems": systems, "schema": files["schema"]})
    assert response.status_code == 422 and response.json()["error"]["field"] == \
        "inputs.dialogues"
    body = json.dumps({"kind": "leaderboard", "inputs": {
        "systems": systems, "schema": files["schema"], "dialogues": files["dialogues"]},
        "options": {"confidence": 0.123456}})
    raw = body.replace("0.123456", "NaN")
    response = api.post("/v1/jobs", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text


def test_another_project_sees_nothing_of_the_job(service_env):
    api, files, systems = _systems(service_env)
    job = _submit(api, {"systems": systems, "schema": files["schema"],
                        "dialogues": files["dialogues"]}).json()
    assert api.wait(job["id"], timeout=60)["status"] == "succeeded"
    other = service_env["tokens"]["other"]
    for url in (f"/v1/jobs/{job['id']}", f"/v1/jobs/{job['id']}/results"):
        assert api.get(url, token=other).status_code == 404
    # nor can it name this project's files as its systems
    refused = _submit(api, {"systems": systems, "schema": files["schema"],
                            "dialogues": files["dialogues"]}, token=other)
    assert refused.status_code == 422 and refused.json()["error"]["field"].startswith("inputs.")


def test_corrections_add_the_corrected_version_beside_the_one_they_correct(service_env,
                                                                           tmp_path):
    from judge.data import apply_corrections, read_corrections
    from tests.service.jobs.test_service_corrections import _corrections

    api, files, systems = _systems(service_env)
    path = _corrections(tmp_path)
    fix = api.upload(path, "corrections").json()["id"]
    inputs = {"systems": systems, "schema": files["schema"], "dialogues": files["dialogues"],
              "corrections": [fix]}
    job = _submit(api, inputs, {"gold": ["2.1"], "names": ["strong", "weak"]})
    done = api.wait(job.json()["id"], timeout=60)
    assert done["status"] == "succeeded", done
    board = api.get(f"/v1/jobs/{done['id']}/results").json()
    schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=schema)
    corrected = apply_corrections(dialogues, "2.1", read_corrections([path]), schema=schema)
    assert board["method"]["versions"] == ["2.1", corrected.name]
    assert board["corrections"][0]["name"] == corrected.name
    options = MetricOptions(per_dialogue=False, breakdowns=False)
    versions = ["2.1", corrected.name]
    scored = [score_predictions(corrected.dialogues, load_predictions(
        EXAMPLES / f, corrected.dialogues, schema), schema, versions=versions,
        options=options, name=n) for f, n in (("predictions.jsonl", "strong"),
                                              ("predictions-weak.jsonl", "weak"))]
    expected = build_leaderboard(Layout.of(corrected.dialogues, schema, versions,
                                           separator=schema.multi_value_separator),
                                 scored, options=options).to_json()
    assert _comparable(board) == _comparable(expected)
    # corrections of a version the job does not score: the job fails saying so
    other = _submit(api, inputs, {"gold": ["2.4"]})
    failed = api.wait(other.json()["id"], timeout=60)
    assert failed["status"] == "failed" and failed["exit_code"] == 2
    assert "options.gold" in failed["error"] and "2.1" in failed["error"]
