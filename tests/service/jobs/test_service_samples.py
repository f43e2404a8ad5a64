"""The service's agreement and compare jobs check samples and labels as the CLI does: a sample
is drawn again from its run and refused (HTTP 422 at submission, naming the input and the
first line that differs) when it differs; labels pair with runs by the predictions they name
(issue 34, items 1, 2 and 7)."""

from __future__ import annotations

import hashlib
import json

from judge.analysis import draw_sample, write_sample
from tests.conftest import EXAMPLES


def _rows(api, job_id):
    return [json.loads(line) for line in
            api.get(f"/v1/jobs/{job_id}/judgments").text.splitlines()]


def _upload_jsonl(api, tmp_path, name, kind, records):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    response = api.upload(path, kind)
    assert response.status_code in (200, 201), response.text  # 200: the same content again
    return response.json()["id"]


def _sample_records(rows, tmp_path, name="genuine.jsonl", **options):
    sample = draw_sample(rows, n=5, design="random", seed=3, **options)
    write_sample(sample, tmp_path / name)
    return [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]


def _labels(keys, digest=None, reviewer="ana"):
    return [{"dialogue_id": d, "turn_index": t, "label": 1, "reviewer": reviewer,
             **({"predictions_sha256": digest} if digest else {})} for d, t in keys]


def _agreement(api, run, human, sample):
    return api.post("/v1/jobs", json={"kind": "agreement", "inputs": {
        "run": run, "human": human, "sample": sample}, "options": {"n_boot": 0}})


def _refused(response, field, *phrases):
    assert response.status_code == 422, response.text
    body = response.text
    assert field in body and "Traceback" not in body
    assert "/data/" not in body and "blobs" not in body  # no server path
    for phrase in phrases:
        assert phrase in body, body


def test_tampered_samples_are_refused_at_submission(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    run = api.evaluated(files)
    rows = _rows(api, run)
    genuine = _sample_records(rows, tmp_path)
    drawn = {(r["dialogue_id"], r["turn_index"]) for r in genuine}
    others = [(r["dialogue_id"], r["turn_index"]) for r in rows
              if (r["dialogue_id"], r["turn_index"]) not in drawn]
    human = _upload_jsonl(api, tmp_path, "labels.jsonl", "labels",
                          _labels([(r["dialogue_id"], r["turn_index"]) for r in rows]))
    # the genuine sample runs
    ok = _agreement(api, run, human, _upload_jsonl(api, tmp_path, "s.jsonl", "sample", genuine))
    assert ok.status_code == 201, ok.text
    done = api.wait(ok.json()["id"])
    assert done["status"] == "succeeded", done
    result = api.get(f"/v1/jobs/{done['id']}/results").json()["population"]
    assert result["sample_check"].startswith("drawn again from this run")
    # a genuine header over hand-picked turns
    picked = [{**genuine[0], "dialogue_id": d, "turn_index": t} for d, t in others[:5]]
    _refused(_agreement(api, run, human,
                        _upload_jsonl(api, tmp_path, "picked.jsonl", "sample", picked)),
             "inputs.sample", "picked.jsonl:1", "not drawn by the recorded design random")
    # a disagreement queue passed off as random: the run's non-random turns, same count
    queue = sorted(rows, key=lambda r: (r["verdict"] == r["rule"]["2.1"], r["dialogue_id"],
                                        r["turn_index"]))[:5]
    passed_off = [{**genuine[0], "dialogue_id": r["dialogue_id"],
                   "turn_index": r["turn_index"]} for r in queue]
    assert {(r["dialogue_id"], r["turn_index"]) for r in passed_off} != drawn
    _refused(_agreement(api, run, human,
                        _upload_jsonl(api, tmp_path, "queue.jsonl", "sample", passed_off)),
             "inputs.sample", "queue.jsonl", "not drawn by")
    # a sample without labels is refused before it queues
    response = api.post("/v1/jobs", json={"kind": "agreement", "inputs": {
        "run": run, "sample": _upload_jsonl(api, tmp_path, "s2.jsonl", "sample", genuine)}})
    _refused(response, "inputs.human", "add the labels file")
    # one turn id edited
    edited = [dict(r) for r in genuine]
    edited[1].update(dialogue_id=others[0][0], turn_index=others[0][1])
    _refused(_agreement(api, run, human,
                        _upload_jsonl(api, tmp_path, "edited.jsonl", "sample", edited)),
             "inputs.sample", "edited.jsonl:2", "edited: that design draws")


def test_a_sample_and_labels_of_another_run_are_refused(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    run = api.evaluated(files)
    weak_files = {**files, "predictions": api.upload(EXAMPLES / "predictions-weak.jsonl",
                                                     "predictions").json()["id"]}
    weak = api.evaluated(weak_files)
    weak_digest = hashlib.sha256((EXAMPLES / "predictions-weak.jsonl").read_bytes()).hexdigest()
    rows = _rows(api, run)
    keys = [(r["dialogue_id"], r["turn_index"]) for r in rows]
    human = _upload_jsonl(api, tmp_path, "labels.jsonl", "labels", _labels(keys))
    other = _sample_records(_rows(api, weak), tmp_path, "weak.jsonl",
                            predictions_sha256=weak_digest)
    _refused(_agreement(api, run, human,
                        _upload_jsonl(api, tmp_path, "weak.jsonl", "sample", other)),
             "inputs.sample", "a sample of another run")
    weak_labels = _upload_jsonl(api, tmp_path, "weak-labels.jsonl", "labels",
                                _labels(keys, weak_digest))
    response = api.post("/v1/jobs", json={"kind": "agreement",
                                          "inputs": {"run": run, "human": weak_labels}})
    _refused(response, "inputs.human", "weak-labels.jsonl:1", "another run's predictions")


def test_compare_job_takes_a_sample_and_pairs_labels_by_their_predictions(service_env,
                                                                          tmp_path):
    api, files = service_env["api"], service_env["files"]
    good = api.evaluated(files)
    weak_files = {**files, "predictions": api.upload(EXAMPLES / "predictions-weak.jsonl",
                                                     "predictions").json()["id"]}
    weak = api.evaluated(weak_files)
    digests = {name: hashlib.sha256((EXAMPLES / f).read_bytes()).hexdigest()
               for name, f in (("good", "predictions.jsonl"),
                               ("weak", "predictions-weak.jsonl"))}
    rows = _rows(api, good)
    keys = [(r["dialogue_id"], r["turn_index"]) for r in rows]
    sample_records = [json.loads(line) for line in _write_full(rows, tmp_path, digests["good"])]
    sample = _upload_jsonl(api, tmp_path, "shared.jsonl", "sample", sample_records)
    truth = {"good": {k: 1 for k in keys}, "weak": {k: int(i % 3 == 0)
                                                    for i, k in enumerate(keys)}}
    labels = {name: _upload_jsonl(api, tmp_path, f"{name}.jsonl", "labels", [
        {"dialogue_id": d, "turn_index": t, "label": truth[name][(d, t)], "reviewer": "ana",
         "predictions_sha256": digests[name]} for d, t in keys]) for name in truth}
    values = []
    for order in (("good", "weak"), ("weak", "good")):
        response = api.post("/v1/jobs", json={"kind": "compare", "inputs": {
            "runs": [good, weak], "human": [labels[n] for n in order], "sample": sample},
            "options": {"tuning": "plain"}})
        assert response.status_code == 201, response.text
        done = api.wait(response.json()["id"])
        assert done["status"] == "succeeded", done
        table = api.get(f"/v1/jobs/{done['id']}/results").json()
        assert "labels_pairing" not in table
        values.append(table["differences"][0]["estimates"]["tsa"]["labels"]["value"])
    expected = 100 * (sum(truth["good"].values()) - sum(truth["weak"].values())) / len(keys)
    assert values[0] == values[1] == expected > 0
    # the sample was drawn from the good run, here the second: found at any position
    response = api.post("/v1/jobs", json={"kind": "compare", "inputs": {
        "runs": [weak, good], "human": [labels["good"], labels["weak"]], "sample": sample}})
    assert response.status_code == 201, response.text
    done = api.wait(response.json()["id"])
    assert done["status"] == "succeeded", done
    table = api.get(f"/v1/jobs/{done['id']}/results").json()
    assert table["differences"][0]["estimates"]["tsa"]["labels"]["value"] == -expected
    stranger = _upload_jsonl(api, tmp_path, "stranger.jsonl", "labels", [
        {"dialogue_id": d, "turn_index": t, "label": 1, "predictions_sha256": "e" * 64}
        for d, t in keys])
    response = api.post("/v1/jobs", json={"kind": "compare", "inputs": {
        "runs": [good, weak], "human": [labels["good"], stranger], "sample": sample}})
    _refused(response, "inputs.human[1]", "stranger.jsonl:1", "no run given judged")
    response = api.post("/v1/jobs", json={"kind": "compare", "inputs": {
        "runs": [good, weak], "human": [labels["good"]], "sample": sample}})
    _refused(response, "inputs.human", "one labels file per run")


def _write_full(rows, tmp_path, digest):
    """A census sample (every turn) of the first run, naming its predictions."""
    sample = draw_sample(rows, n=len(rows), design="random", predictions_sha256=digest)
    path = tmp_path / "census.jsonl"
    write_sample(sample, path)
    return path.read_text().splitlines()
