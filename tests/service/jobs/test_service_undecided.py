"""The service's agreement and compare jobs state reviewer ties and unsure labels as such: the
count and the turns, how the decided labels were reached, that the undecided turns are left
out of the estimates, and the estimates were every one of them correct or every one wrong
(issue 34, item 5)."""

from __future__ import annotations

import hashlib
import json

from judge.analysis import draw_sample, write_sample
from tests.conftest import EXAMPLES


def _keys(api, job_id):
    rows = [json.loads(line) for line in
            api.get(f"/v1/jobs/{job_id}/judgments").text.splitlines()]
    return rows, [(r["dialogue_id"], r["turn_index"]) for r in rows]


def _upload(api, tmp_path, name, kind, records):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    response = api.upload(path, kind)
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def _census(api, tmp_path, rows, digest):
    """Every turn of the run as a simple random sample (so each figure is exact)."""
    sample = draw_sample(rows, n=len(rows), design="random", predictions_sha256=digest)
    write_sample(sample, tmp_path / "census.jsonl")
    return api.upload(tmp_path / "census.jsonl", "sample").json()["id"]


def _split_labels(keys, digest, wrong=()):
    """Two reviewers: they split on the first turn (ana correct, bo wrong), are both unsure
    of the second; ana alone labels the rest, correct except the turns in ``wrong``."""
    tied, unsure, *rest = keys
    records = [{"dialogue_id": tied[0], "turn_index": tied[1], "label": 1, "reviewer": "ana"},
               {"dialogue_id": tied[0], "turn_index": tied[1], "label": 0, "reviewer": "bo"}]
    records += [{"dialogue_id": unsure[0], "turn_index": unsure[1], "label": None,
                 "unsure": True, "reviewer": who} for who in ("ana", "bo")]
    records += [{"dialogue_id": d, "turn_index": t, "label": int((d, t) not in wrong),
                 "reviewer": "ana"} for d, t in rest]
    return [{**r, "predictions_sha256": digest} for r in records]


def _digest(name):
    return hashlib.sha256((EXAMPLES / name).read_bytes()).hexdigest()


def _named(examples):
    return {(e["dialogue_id"], e["turn_index"]) for e in examples}


def test_agreement_job_states_tied_and_unsure_turns_with_bounds(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    run = api.evaluated(files)
    rows, keys = _keys(api, run)
    digest = _digest("predictions.jsonl")
    wrong = {keys[2]}
    human = _upload(api, tmp_path, "labels.jsonl", "labels", _split_labels(keys, digest, wrong))
    response = api.post("/v1/jobs", json={"kind": "agreement", "inputs": {
        "run": run, "human": human, "sample": _census(api, tmp_path, rows, digest)},
        "options": {"n_boot": 0}})
    assert response.status_code == 201, response.text
    done = api.wait(response.json()["id"])
    assert done["status"] == "succeeded", done
    result = api.get(f"/v1/jobs/{done['id']}/results").json()
    # the labels file's own account: one tie, two unsure labels, named turns
    summary = result["human"]
    assert summary["tied_turns"] == 1 and summary["unsure"] == 2
    assert summary["undecided"]["tied"]["count"] == 1
    assert _named(summary["undecided"]["tied"]["examples"]) == {keys[0]}
    assert summary["undecided"]["unsure"]["count"] == 1
    assert _named(summary["undecided"]["unsure"]["examples"]) == {keys[1]}
    # the estimates: the two undecided sampled turns left out, said so, and bounded
    estimation = result["population"]["estimation"]
    undecided = estimation["undecided_sampled_turns"]
    assert undecided["count"] == 2
    assert _named(undecided["tied"]["examples"]) == {keys[0]}
    assert _named(undecided["unsure"]["examples"]) == {keys[1]}
    assert "left out of the estimates" in undecided["treatment"]
    assert undecided["labels_by"]["majority"] == len(keys) - 2
    decided = len(keys) - 2
    tsa = result["population"]["estimates"]["tsa"]
    assert tsa["labels"]["n_labelled"] == decided
    assert abs(tsa["labels"]["value"] - 100 * (decided - 1) / decided) < 1e-9
    bounds = undecided["bounds"]["tsa"]
    assert abs(bounds["upper"]["labels"]["value"] - 100 * (decided + 1) / len(keys)) < 1e-9
    assert abs(bounds["lower"]["labels"]["value"] - 100 * (decided - 1) / len(keys)) < 1e-9
    assert bounds["lower"]["ppi"]["value"] <= tsa["ppi"]["value"] \
        <= bounds["upper"]["ppi"]["value"]


def test_compare_job_states_tied_and_unsure_turns_with_bounds(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    good = api.evaluated(files)
    weak_name = "predictions-weak.jsonl"
    weak = api.evaluated({**files, "predictions": api.upload(EXAMPLES / weak_name,
                                                              "predictions").json()["id"]})
    rows, keys = _keys(api, good)
    digests = {"good": _digest("predictions.jsonl"), "weak": _digest(weak_name)}
    sample = _census(api, tmp_path, rows, digests["good"])
    # run A (good): a tie and an unsure turn; run B (weak): every turn labelled wrong
    human = [_upload(api, tmp_path, "good.jsonl", "labels",
                     _split_labels(keys, digests["good"])),
             _upload(api, tmp_path, "weak.jsonl", "labels", [
                 {"dialogue_id": d, "turn_index": t, "label": 0, "reviewer": "ana",
                  "predictions_sha256": digests["weak"]} for d, t in keys])]
    response = api.post("/v1/jobs", json={"kind": "compare", "inputs": {
        "runs": [good, weak], "human": human, "sample": sample}})
    assert response.status_code == 201, response.text
    done = api.wait(response.json()["id"])
    assert done["status"] == "succeeded", done
    table = api.get(f"/v1/jobs/{done['id']}/results").json()
    difference = table["differences"][0]
    undecided = difference["undecided_sampled_turns"]
    assert undecided["count"] == 2
    assert _named(undecided["tied"]["examples"]) == {keys[0]}
    assert _named(undecided["unsure"]["examples"]) == {keys[1]}
    assert "left out of the estimates" in undecided["treatment"]
    assert "first run's favour" in undecided["treatment"]
    decided = len(keys) - 2
    tsa = difference["estimates"]["tsa"]
    assert abs(tsa["labels"]["value"] - 100.0) < 1e-9  # A correct, B wrong on every decided
    bounds = undecided["bounds"]["tsa"]
    # A's undecided turns counted in A's favour (correct; B's labels there are decided: wrong)
    # for the upper bound, against it (wrong, as B) for the lower
    assert abs(bounds["upper"]["labels"]["value"] - 100.0) < 1e-9
    assert abs(bounds["lower"]["labels"]["value"] - 100 * decided / len(keys)) < 1e-9
