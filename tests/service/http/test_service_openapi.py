"""The service's contract as its OpenAPI document states it: a bearer scheme on every ``/v1``
operation, the scope each one needs (read off its dependencies), every error status with the
error body, media types of the non-JSON answers, readable operation ids, size limits and
links; a 405 names every method of its path in ``Allow``; the route table of
``docs/SERVICE.md`` and ``docs/openapi.json`` are the ones the document generates; the
client's models are the server's; ``create_app`` only composes them."""

from __future__ import annotations

import inspect
import json
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import judge.client
from judge._api_models import ApiModel
from judge._version import __version__
from judge.service import create_app
from judge.service.http._routes import ROUTERS, scopes_of
from tests.service.openapi_docs import (
    BEGIN,
    END,
    OPENAPI_JSON,
    SERVICE_MD,
    document_text,
    openapi_document,
    route_table,
    with_table,
)

OPERATIONS = {
    "get_health", "get_readiness", "get_metrics", "get_me", "get_usage", "list_tokens",
    "create_token",
    "revoke_token", "list_endpoints", "upload_file", "list_files", "get_file", "delete_file",
    "get_file_content", "create_job", "list_jobs", "get_job", "delete_job", "cancel_job",
    "resume_job", "get_job_events", "get_job_results", "list_job_judgments",
    "get_job_artifact", "export_job", "export_job_corrections", "import_bundle", "put_label",
    "list_labels", "delete_label"}


@pytest.fixture
def document(tmp_path) -> dict[str, Any]:
    """Built for each test (not once per module): a mutation run maps a test to the code it
    calls, and a module's fixture is called by its first test only."""
    from judge.service import build_settings

    settings = build_settings({"data_dir": tmp_path})
    return create_app(settings, run_worker=False).openapi()


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_every_reference_resolves_and_every_response_is_described(document):
    """A generated client follows each ``$ref``; one that points nowhere breaks it."""
    schemas = document["components"]["schemas"]
    refs = set(_refs(document))
    assert "#/components/schemas/Error" in refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    for method, path, op in _operations(document):
        for code, response in op["responses"].items():
            assert isinstance(response, dict) and response.get("description"), (
                method, path, code, response)
        if "requestBody" in op:
            assert op["requestBody"]["description"].endswith(" (else 413)."), (method, path)


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in document["paths"].items()
            for method, op in ops.items()]


def test_the_document_introduces_the_service(document):
    """What a generated client's README and the offline API page show first."""
    info = document["info"]
    assert info["title"] == "dst-judge service"
    assert info["description"] == ("Score dialogue state tracking systems with an LLM judge "
                                   "and the exact-match metric suite, as a shared service.")
    assert info["version"] == __version__


def test_every_operation_has_a_readable_id(document):
    ids = [op["operationId"] for _, _, op in _operations(document)]
    assert sorted(ids) == sorted(OPERATIONS)


def test_every_v1_operation_needs_the_bearer_scheme_and_states_its_scope(document):
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "dsj_...",
        "description": document["components"]["securitySchemes"]["bearer"]["description"]}
    for method, path, op in _operations(document):
        names = {p["name"].lower() for p in op.get("parameters", [])}
        assert "authorization" not in names, (method, path)  # a scheme, not a header parameter
        if path.startswith("/v1/") or path == "/metrics":  # /metrics: an admin's
            assert op["security"] == [{"bearer": []}], (method, path)
            assert op["x-required-scopes"] in (["read"], ["submit"], ["review"], ["admin"])
            assert {"401", "429"} <= set(op["responses"]), (method, path)
            if op["x-required-scopes"] != ["read"]:
                assert "403" in op["responses"], (method, path)
        else:
            assert "security" not in op, (method, path)


def test_every_v1_route_depends_on_a_scope():
    """By construction, not by convention: each route of an API router carries a
    ``require_scope`` dependency (the document's ``x-required-scopes`` is read from it)."""
    routes = [route for router in ROUTERS for route in router.routes]
    assert len(routes) == len(OPERATIONS)
    for route in routes:
        if route.path.startswith("/v1/"):
            assert len(set(scopes_of(route.dependant))) == 1, route.path


def test_every_error_is_documented_with_the_error_body(document):
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's default 422 body is never sent
    assert set(schemas["Error"]["properties"]) == {"error"}
    for method, path, op in _operations(document):
        has_params = bool(op.get("parameters")) or "requestBody" in op
        if has_params and path.startswith("/v1/"):
            assert "422" in op["responses"], (method, path)
        if "{" in path:
            assert "404" in op["responses"], (method, path)
        if "requestBody" in op:
            assert {"400", "413"} <= set(op["responses"]), (method, path)
            assert op["requestBody"]["x-max-bytes"] > 0
            assert "At most" in op["requestBody"]["description"]
        for code, response in op["responses"].items():
            if code >= "400" and code != "503":
                assert response["content"] == {"application/json": {"schema": {
                    "$ref": "#/components/schemas/Error"}}}, (method, path, code)


def test_non_json_answers_declare_their_media_type(document):
    def media(path: str, method: str = "get", code: str = "200") -> set[str]:
        return set(document["paths"][path][method]["responses"][code]["content"])

    assert media("/v1/jobs/{job_id}/judgments") == {"application/x-ndjson"}
    assert media("/v1/jobs/{job_id}/events") == {"text/event-stream"}
    assert media("/v1/jobs/{job_id}/export") == {"application/gzip"}
    assert media("/v1/files/{file_id}/content") == {"application/octet-stream"}
    assert media("/v1/labels") == {"application/json", "application/x-ndjson"}
    assert media("/metrics") == {"text/plain"}


def _server_sent_events(text: str) -> list[dict[str, str]]:
    """The events of a ``text/event-stream`` body (comments left out), fields as strings."""
    events = []
    for block in text.split("\n\n"):
        fields = [line.split(": ", 1) for line in block.splitlines()
                  if line and not line.startswith(":")]
        if fields:
            events.append(dict(fields))
    return events


def test_every_event_of_the_job_stream_is_what_the_document_says(service_env):
    """Each event's data is the job as JSON (issue 36: the document said any string, and
    schemathesis found each event carrying a JSON job against it)."""
    api, files = service_env["api"], service_env["files"]
    document = api.get("/openapi.json").json()
    job = api.post("/v1/jobs", json={"kind": "metrics", "inputs": {
        "schema": files["schema"], "dialogues": files["dialogues"],
        "predictions": [files["predictions"]]}}).json()
    api.wait(job["id"])
    media = document["paths"]["/v1/jobs/{job_id}/events"]["get"]["responses"]["200"][
        "content"]["text/event-stream"]
    assert "schema" not in media  # the stream is no one string
    registry = Registry().with_resource(
        "urn:doc", Resource.from_contents(document, default_specification=DRAFT202012))
    item = {**media["itemSchema"], "$id": "urn:event"}
    data_schema = item["properties"]["data"]
    assert data_schema["contentMediaType"] == "application/json"

    def check(instance: Any, schema: dict[str, Any]) -> None:
        resolved = json.loads(json.dumps(schema).replace('"#/components', '"urn:doc#/components'))
        jsonschema.Draft202012Validator(resolved, registry=registry).validate(instance)

    events = _server_sent_events(api.get(f"/v1/jobs/{job['id']}/events").text)
    assert events and events[-1]["event"] == "end", events
    for event in events:
        check(event, item)
        check(json.loads(event["data"]), data_schema["contentSchema"])
    assert json.loads(events[-1]["data"])["id"] == job["id"]
    # and the schema is not an anything-goes: a string that is not a job is refused
    with pytest.raises(jsonschema.ValidationError):
        check({"status": "running"}, data_schema["contentSchema"])


def test_limits_ranges_and_links_are_in_the_document(document):
    params = {p["name"]: p["schema"] for p in document["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert params["limit"]["maximum"] == 1000 and params["limit"]["minimum"] == 1
    assert params["offset"]["maximum"] == 2**31 - 1
    assert set(params["status"]["anyOf"][0]["enum"]) >= {"queued", "running", "waiting"}
    job = document["components"]["schemas"]["Job"]["properties"]
    assert "enum" in job["status"]  # typed, not a bare string
    assert job["progress"] == {"$ref": "#/components/schemas/JobProgress"}
    created = document["paths"]["/v1/jobs"]["post"]["responses"]["201"]["links"]
    assert created["get_job"] == {"operationId": "get_job", "description": "The job just "
                                  "returned.", "parameters": {"job_id": "$response.body#/id"}}
    token = document["paths"]["/v1/tokens"]["post"]["responses"]["201"]["links"]
    assert token["revoke_token"]["parameters"] == {"token_id": "$response.body#/id"}


def test_the_clients_models_are_the_servers(document):
    """judge.Client parses answers into the very classes the routes declare; their schemas
    are the document's components."""
    schemas = document["components"]["schemas"]
    for name in judge.client.__all__:
        model = getattr(judge.client, name)
        if not (isinstance(model, type) and issubclass(model, ApiModel)):
            continue
        mine = model.model_json_schema(mode="serialization",
                                       ref_template="#/components/schemas/{model}")
        mine.pop("$defs", None)
        served = schemas.get(f"{name}-Output", schemas.get(name))
        assert served is not None, name
        assert set(mine["properties"]) == set(served["properties"]), name
        assert set(mine.get("required", [])) == set(served.get("required", [])), name


def test_405_names_every_method_of_the_path(service_env):
    api = service_env["api"]
    refused = api.request("PATCH", "/v1/jobs")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, POST"
    assert refused.json()["error"]["status"] == 405
    one = api.request("PUT", "/v1/files/file_x")
    assert one.status_code == 405 and one.headers["allow"] == "DELETE, GET"


def test_the_route_table_of_the_docs_is_generated(document):
    text = SERVICE_MD.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert text == with_table(text, route_table(document)), (
        "docs/SERVICE.md's route table is stale: run `python -m tests.service.openapi_docs`")


def test_the_published_document_is_the_apps(monkeypatch):
    """The site publishes ``docs/openapi.json`` (and renders the HTTP API page from it), read
    from the file because the ``docs`` extra cannot import the service: it must be the app's
    with default settings, whatever this environment sets."""
    monkeypatch.setenv("DST_JUDGE_SERVE_MAX_JSON_MB", "3")
    assert OPENAPI_JSON.read_text(encoding="utf-8") == document_text(openapi_document()), (
        "docs/openapi.json is stale: run `python -m tests.service.openapi_docs`")


def test_create_app_only_composes():
    """Function length in service/ and web/ is checked by tests/test_layers.py."""
    from judge.service.http._app import create_app as factory

    assert len(inspect.getsource(factory).splitlines()) < 60


def test_the_document_describes_each_job_kind_s_options():
    """A job's ``options`` (and ``inputs``) are each kind's typed model in the document (types,
    ranges, no unknown names), not an untyped object; the same model refuses a value at its
    JSON path."""
    from judge._errors import ServiceError
    from judge.service.jobs._options import check_options
    from tests.service.openapi_docs import openapi_document

    schemas = openapi_document()["components"]["schemas"]
    options = schemas["JobRequest"]["properties"]["options"]
    assert {member["$ref"].rsplit("/", 1)[1] for member in options["anyOf"]} == {
        "EvaluateOptions", "BatchEvaluateOptions", "MetricsOptions", "AgreementOptions",
        "CompareOptions", "AuditOptions", "RetryErrorsOptions", "LeaderboardOptions"}
    assert schemas["LeaderboardOptions"]["additionalProperties"] is False
    assert schemas["LeaderboardOptions"]["properties"]["correction"]["enum"] == ["holm", "by"]
    assert {"LeaderboardInputs", "AuditInputs"} <= {m["$ref"].rsplit("/", 1)[1]
                                                   for m in schemas["JobRequest"]["properties"]
                                                   ["inputs"]["anyOf"]}
    assert "run" not in schemas["AuditInputs"].get("required", [])  # or predictions files
    evaluate, batch = schemas["EvaluateOptions"], schemas["BatchEvaluateOptions"]
    assert evaluate["additionalProperties"] is False
    temperature = evaluate["properties"]["temperature"]
    assert (temperature["type"], temperature["minimum"], temperature["maximum"]) == (
        "number", 0, 2)
    assert evaluate["properties"]["method"]["enum"] == ["two-dim", "two-dim-cot", "direct",
                                                        "cot"]
    assert "batch_max_requests" in batch["properties"]
    assert "batch_max_requests" not in evaluate["properties"]
    confidence = schemas["AgreementOptions"]["properties"]["confidence"]
    assert (confidence["exclusiveMinimum"], confidence["exclusiveMaximum"]) == (0, 1)
    assert schemas["AuditOptions"]["properties"] == {}
    inputs = schemas["JobRequest"]["properties"]["inputs"]
    assert "EvaluateInputs" in {m["$ref"].rsplit("/", 1)[1] for m in inputs["anyOf"]}
    assert schemas["EvaluateInputs"]["required"] == ["schema", "dialogues", "predictions"]
    assert schemas["EvaluateInputs"]["additionalProperties"] is False
    for value in (float("nan"), float("inf")):
        with pytest.raises(ServiceError) as refused:
            check_options("evaluate", "live", {"temperature": value})
        assert (refused.value.status, refused.value.field) == (422, "options.temperature")
    with pytest.raises(ServiceError) as refused:
        check_options("metrics", "live", {"fga_lambdas": [0.5, float("nan")]})
    assert refused.value.field == "options.fga_lambdas"
