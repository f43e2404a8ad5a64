"""Security of the service: 401 without a token, 403 without the scope, 404 for another
project's data, 413 for oversize (and gzip-bomb) uploads, 422 for URLs or server paths in job
options, and the endpoint key never in a response, a result, a log or the database."""

from __future__ import annotations

import gzip
import logging

import sqlalchemy as sa

from judge.service import revoke_token
from judge.service.db._db import tokens as tokens_table
from tests.service.conftest import CANARY_KEY, running_service, service_settings


def test_no_token_or_a_bad_one_is_401(service_env):
    api = service_env["api"]
    for token in ("", "dsj_wrong", ):
        response = api.get("/v1/jobs", token=token)
        assert response.status_code == 401, token
        assert response.json()["error"]["status"] == 401
        assert response.headers["www-authenticate"] == "Bearer"
    basic = api.get("/v1/jobs", token="", headers={"Authorization": "Basic eDp5"})
    assert basic.status_code == 401


def test_revoked_token_is_401(service_env):
    api, service = service_env["api"], service_env["service"]
    token = service_env["tokens"]["read"]
    assert api.get("/v1/jobs", token=token).status_code == 200
    with service.db.read() as conn:
        token_id = conn.execute(sa.select(tokens_table.c.id)
                                .where(tokens_table.c.name == "reader")).scalar()
    assert revoke_token(service.db, token_id)
    assert api.get("/v1/jobs", token=token).status_code == 401


def test_wrong_scope_is_403(service_env):
    api, tokens, files = service_env["api"], service_env["tokens"], service_env["files"]
    read = tokens["read"]
    job = {"kind": "evaluate", "inputs": files}
    assert api.post("/v1/jobs", token=read, json=job).status_code == 403
    assert api.upload("examples/schema.json", "schema", token=read).status_code == 403
    assert api.get("/v1/tokens", token=tokens["submit"]).status_code == 403
    assert api.put("/v1/labels", token=tokens["submit"], json={
        "dialogue_id": "x", "turn_index": 0, "label": "correct"}).status_code == 403
    assert api.get("/v1/tokens", token=tokens["admin"]).status_code == 200
    message = api.post("/v1/jobs", token=read, json=job).json()["error"]["message"]
    assert "'submit'" in message


def test_another_projects_data_is_404(service_env):
    api, files, other = service_env["api"], service_env["files"], service_env["tokens"]["other"]
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "m"}}).json()
    api.wait(job["id"])
    for path in (f"/v1/jobs/{job['id']}", f"/v1/jobs/{job['id']}/results",
                 f"/v1/jobs/{job['id']}/judgments", f"/v1/jobs/{job['id']}/export",
                 f"/v1/jobs/{job['id']}/events", f"/v1/files/{files['schema']}",
                 f"/v1/files/{files['schema']}/content"):
        response = api.get(path, token=other)
        assert response.status_code == 404, path
    assert api.post(f"/v1/jobs/{job['id']}/cancel", token=other).status_code == 404
    assert api.delete(f"/v1/jobs/{job['id']}", token=other).status_code == 404
    assert api.delete(f"/v1/files/{files['schema']}", token=other).status_code == 404
    assert api.get("/v1/jobs", token=other).json()["jobs"] == []
    assert api.get("/v1/files", token=other).json()["files"] == []
    # and another project's files cannot be used as inputs either
    stolen = api.post("/v1/jobs", token=other, json={"kind": "evaluate", "inputs": files})
    assert stolen.status_code == 422 and stolen.json()["error"]["field"] == "inputs.schema"
    assert api.get(f"/v1/jobs/{job['id']}").status_code == 200  # the owner still sees it


def test_oversize_uploads_are_413(tmp_path, fake_model):
    from judge.service import create_token
    from tests.service.conftest import Api

    settings = service_settings(tmp_path / "data", fake_model.url, max_upload_mb=0.01,
                                max_unpacked_mb=0.05, job_slots=0)
    with running_service(settings) as (service, app):
        api = Api(app, create_token(service.db, "lab", "submit")[0])
        try:
            big = b'{"dialogue_id": "x"}\n' * 2000  # 42 kB > 10 kB
            response = api.upload("big.jsonl", "dialogues", content=big)
            assert response.status_code == 413
            assert "limit" in response.json()["error"]["message"]
            bomb = gzip.compress(b" " * 200_000)  # 200 kB unpacked from ~200 bytes
            assert len(bomb) < 10_000
            response = api.upload("bomb.jsonl.gz", "dialogues", content=bomb)
            assert response.status_code == 413
            assert "unpacks" in response.json()["error"]["message"]
            bundle = api.post("/v1/bundles", files={"file": ("b.tar.gz", big)})
            assert bundle.status_code == 413
        finally:
            api.close()


INJECTIONS = [
    ({"base_url": "http://169.254.169.254/latest"}, "options.base_url"),
    ({"endpoint": "http://evil.example/v1"}, "options.endpoint"),
    ({"endpoint": "nope"}, "options.endpoint"),
    ({"api_key": "sk-x"}, "options.api_key"),
    ({"prices": "/etc/passwd"}, "options.prices"),
    ({"rules": "/etc/passwd"}, "options.rules"),
    ({"config": "/etc/passwd"}, "options.config"),
    ({"cache_dir": "/tmp/x"}, "options.cache_dir"),
    ({"model": "gpt\r\nHost: evil"}, "options.model"),
    ({"top_p": 5}, "options.top_p"),
    ({"temperature": "hot"}, "options.temperature"),
    ({"surprise": 1}, "options.surprise"),
    ({"endpoint": "other", "model": "gpt-4o"}, "options.model"),
    ({"concurrency": 10_000}, "options.concurrency"),
]


def test_url_injection_and_bad_options_are_422_with_the_field(service_env):
    api, files = service_env["api"], service_env["files"]
    for options, field in INJECTIONS:
        response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                              "options": options})
        assert response.status_code == 422, (options, response.text)
        assert response.json()["error"]["field"] == field, options
    assert api.get("/v1/jobs").json()["jobs"] == []  # nothing was queued
    assert service_env["model"].snapshot()["total"] == 0  # and nothing was sent anywhere


def test_bad_job_shapes_are_422_with_the_field(service_env):
    api, files = service_env["api"], service_env["files"]
    cases = [
        ({"kind": "train", "inputs": {}}, "kind"),
        ({"kind": "evaluate", "inputs": {"schema": files["schema"]}}, "inputs.dialogues"),
        ({"kind": "evaluate", "inputs": {**files, "extra": "x"}}, "inputs.extra"),
        ({"kind": "evaluate", "inputs": {**files, "schema": files["dialogues"]}},
         "inputs.schema"),
        ({"kind": "evaluate", "inputs": files, "mode": "batch"}, "mode"),
        ({"kind": "agreement", "inputs": {"run": "job_nope"}}, "inputs.run"),
        ({"kind": "metrics", "inputs": {"schema": files["schema"],
                                        "dialogues": files["dialogues"],
                                        "predictions": [files["predictions"]]},
          "options": {"match": "exact", "alpha": 3}}, "options.alpha"),
        ({"kind": "evaluate", "inputs": files, "surprise": True}, "surprise"),
    ]
    for body, field in cases:
        response = api.post("/v1/jobs", json=body)
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field, (body, response.json())
    # the validator's own reason is the message
    kind = api.post("/v1/jobs", json=cases[0][0]).json()["error"]["message"]
    assert kind.startswith("Input should be 'evaluate', 'metrics'"), kind
    extra = api.post("/v1/jobs", json=cases[-1][0]).json()["error"]["message"]
    assert extra == "Extra inputs are not permitted", extra


def test_the_endpoint_key_is_never_shown_stored_or_logged(service_env, caplog):
    api, files, service = service_env["api"], service_env["files"], service_env["service"]
    caplog.set_level(logging.DEBUG)
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "m"}}).json()
    api.wait(job["id"])
    seen = [api.get(f"/v1/jobs/{job['id']}").text, api.get(f"/v1/jobs/{job['id']}/results").text,
            api.get(f"/v1/jobs/{job['id']}/judgments").text,
            api.get(f"/v1/jobs/{job['id']}/export").content.decode("latin-1"),
            api.get("/v1/endpoints").text,
            api.get("/metrics", token=service_env["tokens"]["admin"]).text, caplog.text]
    assert all(CANARY_KEY not in text for text in seen)
    with service.db.read() as conn:
        for table in service.db.engine.dialect.get_table_names(conn):
            for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                assert CANARY_KEY not in str(tuple(row)), table
    store = service_env["settings"].data_dir
    for path in store.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path
