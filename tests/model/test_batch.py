"""Batch API: request files, collecting output files offline, and the submit/status calls."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from judge import InputError, evaluate, load_config
from judge._digest import canonical_json
from judge.cli import main
from judge.model import Cassette, read_output
from judge.pipeline import RunDirectory, collect, plan_evaluation, write_requests

from ..conftest import CASSETTES, EXAMPLES, assert_located, mount_cassette


def _config(tmp_path, **values):
    return load_config({"model": "local", "cache_dir": str(tmp_path / "cache"), **values})


def _output_lines_from_cassette(plan, cassette_name):
    """Batch output lines built from real recorded replies, matched to calls by body."""
    by_body = {canonical_json(i["request"]["body"]): i["response"]
               for i in Cassette.load(CASSETTES / cassette_name)}
    lines = []
    for n, call in enumerate(plan.calls):
        response = by_body[canonical_json(call.body)]
        lines.append({"id": f"batch_req_{n}", "custom_id": call.custom_id,
                      "response": {"status_code": response["status_code"],
                                   "request_id": f"req_{n}", "body": response["body"]},
                      "error": None})
    return lines


def _write(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_prepare_writes_one_line_per_call_with_the_live_body(tmp_path, example_data):
    schema, dialogues, predictions = example_data
    plan = plan_evaluation(_config(tmp_path), schema, dialogues, predictions)
    written = write_requests(plan, tmp_path / "requests.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert written.files == [tmp_path / "requests.jsonl"]
    assert written.requests == len(lines) == len(plan.calls) and written.duplicates == 0
    assert all(line["method"] == "POST" and line["url"] == "/v1/chat/completions"
               for line in lines)
    assert lines[0]["custom_id"] == "EX001.json::0::accuracy"
    assert lines[0]["body"] == plan.calls[0].body
    assert len({line["custom_id"] for line in lines}) == len(lines)


@pytest.mark.parametrize("semantics", ["default", "paper"])
def test_collect_from_file_equals_the_live_run(tmp_path, example_data, semantics):
    schema, dialogues, predictions = example_data
    config = _config(tmp_path, semantics=semantics)
    plan = plan_evaluation(config, schema, dialogues, predictions)
    output = _write(tmp_path / "out.jsonl", _output_lines_from_cassette(plan,
                                                                        "example-two-dim.json"))
    collected = collect(config, schema, dialogues, predictions, read_output(output))
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        mount_cassette(router, "example-two-dim.json")
        live = evaluate(config, schema, dialogues, predictions, http_client=httpx.AsyncClient())
    assert [r["verdict"] for r in collected.rows] == [r["verdict"] for r in live.rows]
    assert [r["trace"] for r in collected.rows] == [r["trace"] for r in live.rows]
    for key in ("tsa", "judge_jga", "rule", "scored_turns"):
        assert collected.summary[key] == live.summary[key]
    assert collected.summary["calls"]["batch_lines_missing"] == 0


def test_collect_missing_and_failed_lines_become_error_rows(tmp_path, example_data):
    schema, dialogues, predictions = example_data
    config = _config(tmp_path)
    plan = plan_evaluation(config, schema, dialogues, predictions)
    lines = _output_lines_from_cassette(plan, "example-two-dim.json")
    lines[0] = {"id": "x", "custom_id": lines[0]["custom_id"], "response": None,
                "error": {"code": "server_error", "message": "the batch worker failed"}}
    lines[1]["response"] = {"status_code": 500, "body": {"error": {"message": "boom"}}}
    del lines[2]
    records = read_output(_write(tmp_path / "out.jsonl", lines))
    result = collect(config, schema, dialogues, predictions, records)
    errors = [r["error"] for r in result.rows if r["error"]]
    assert any("the batch worker failed" in e for e in errors)
    assert any("HTTP 500: boom" in e for e in errors)
    assert any("no line for" in e for e in errors)
    assert result.summary["calls"]["batch_lines_missing"] == 1


def test_collect_accepts_other_dialogue_id_spellings(tmp_path, example_data):
    schema, dialogues, predictions = example_data
    config = _config(tmp_path)
    plan = plan_evaluation(config, schema, dialogues, predictions)
    lines = _output_lines_from_cassette(plan, "example-two-dim.json")
    for line in lines:
        line["custom_id"] = line["custom_id"].replace(".json::", "::").lower()
    result = collect(config, schema, dialogues, predictions,
                     read_output(_write(tmp_path / "out.jsonl", lines)))
    assert result.summary["error_turns"] == 0


@pytest.mark.parametrize(("line", "field"), [
    ("{not json", None), ('{"response": {}}', "custom_id"),
    ('{"custom_id": "no-separators", "response": {}}', "custom_id"),
    ('{"custom_id": "D::0::accuracy"}', "response")])
def test_malformed_output_lines(tmp_path, line, field):
    path = tmp_path / "out.jsonl"
    path.write_text('{"custom_id": "D::0::accuracy", "error": {"message": "x"}}\n' + line + "\n")
    with pytest.raises(InputError) as err:
        read_output(path)
    assert_located(err.value, path, 2, field)


def test_cli_prepare_and_collect(tmp_path, example_data, capsys):
    schema, dialogues, predictions = example_data
    data = ["--schema", str(EXAMPLES / "schema.json"),
            "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
            "--predictions", str(EXAMPLES / "predictions.jsonl"), "--model", "local"]
    assert main(["batch", "prepare", *data, "--out", str(tmp_path / "req.jsonl")]) == 0
    plan = plan_evaluation(_config(tmp_path), schema, dialogues, predictions)
    output = _write(tmp_path / "out.jsonl", _output_lines_from_cassette(
        plan, "example-two-dim.json"))
    assert main(["batch", "collect", "--output-file", str(output), *data,
                 "--semantics", "paper", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["semantics"] == "paper" and summary["scored_turns"] == 11
    folder = RunDirectory(tmp_path / "run")  # kept through the run store, as a live run
    assert folder.read_manifest()["kind"] == "batch"
    assert sorted(e["custom_id"] for e in folder.read_log()) == sorted(
        c.custom_id for c in plan.calls)
    assert "Judge JGA" in capsys.readouterr().out


def test_submit_and_status_speak_the_batch_api(tmp_path):
    """Against hand-written fixture responses of the Files and Batches endpoints."""
    import asyncio

    from judge.model import status, submit

    batch = {"id": "batch_fixture", "object": "batch", "endpoint": "/v1/chat/completions",
             "input_file_id": "file_fixture", "completion_window": "24h",
             "status": "validating", "created_at": 1,
             "request_counts": {"total": 2, "completed": 0, "failed": 0}}
    requests = tmp_path / "req.jsonl"
    requests.write_text('{"custom_id": "D::0::accuracy"}\n')
    config = load_config({"base_url": "http://127.0.0.1:8998/v1", "model": "m"})
    with respx.mock(assert_all_mocked=True) as router:
        upload = router.post("http://127.0.0.1:8998/v1/files").respond(
            200, json={"id": "file_fixture", "object": "file", "bytes": 10, "created_at": 1,
                       "filename": "req.jsonl", "purpose": "batch", "status": "processed"})
        create = router.post("http://127.0.0.1:8998/v1/batches").respond(200, json=batch)
        router.get("http://127.0.0.1:8998/v1/batches/batch_fixture").respond(
            200, json={**batch, "status": "completed",
                       "request_counts": {"total": 2, "completed": 2, "failed": 0}})
        created = asyncio.run(submit(config, requests, http_client=httpx.AsyncClient()))
        polled = asyncio.run(status(config, "batch_fixture", http_client=httpx.AsyncClient()))
    assert upload.called and created["id"] == "batch_fixture"
    sent = json.loads(create.calls[0].request.content)
    assert sent["input_file_id"] == "file_fixture" and sent["endpoint"] == "/v1/chat/completions"
    assert polled["status"] == "completed"


def test_a_lost_creation_is_not_retried_and_is_found_by_its_metadata(tmp_path):
    """A batch creation whose reply never comes is not sent again by the SDK (that could pay
    twice); ``find_batch`` looks the batch up by its metadata, newest first, and stops at
    batches older than it was asked about (fixture responses)."""
    import asyncio

    from judge.errors import ModelError
    from judge.model import find_batch, submit

    requests = tmp_path / "req.jsonl"
    requests.write_text('{"custom_id": "D::0::accuracy"}\n')
    config = load_config({"base_url": "http://127.0.0.1:8998/v1", "model": "m"})
    mine = {"id": "batch_mine", "object": "batch", "endpoint": "/v1/chat/completions",
            "input_file_id": "f", "completion_window": "24h", "status": "validating",
            "created_at": 1_000, "metadata": {"dst_judge_job": "j1", "dst_judge_file": "abc"}}
    listing = {"object": "list", "has_more": False, "data": [
        {**mine, "id": "batch_newer", "created_at": 1_100, "metadata": {"dst_judge_job": "j2"}},
        mine,
        {**mine, "id": "batch_older", "created_at": 10}]}
    with respx.mock(assert_all_mocked=True) as router:
        router.post("http://127.0.0.1:8998/v1/files").respond(
            200, json={"id": "f", "object": "file", "bytes": 10, "created_at": 1,
                       "filename": "req.jsonl", "purpose": "batch", "status": "processed"})
        create = router.post("http://127.0.0.1:8998/v1/batches").mock(
            side_effect=httpx.ConnectError("connection reset"))
        router.get("http://127.0.0.1:8998/v1/batches").respond(200, json=listing)
        with pytest.raises(ModelError, match="batch submit failed"):
            asyncio.run(submit(config, requests, http_client=httpx.AsyncClient(),
                               metadata={"dst_judge_job": "j1"}))
        found = asyncio.run(find_batch(config, {"dst_judge_job": "j1", "dst_judge_file": "abc"},
                                       since=900, http_client=httpx.AsyncClient()))
        too_late = asyncio.run(find_batch(config, {"dst_judge_job": "j1"}, since=5_000,
                                          http_client=httpx.AsyncClient()))
    assert create.call_count == 1
    assert json.loads(create.calls[0].request.content)["metadata"] == {
        "source": "dst-judge", "dst_judge_job": "j1"}
    assert found is not None and found["id"] == "batch_mine"
    assert too_late is None


def test_read_output_hands_back_the_raw_bodies_of_good_replies(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(FIXTURE_OUTPUT + FIXTURE_ERRORS)
    bodies: dict = {}
    records = read_output(path, bodies=bodies)
    from judge.model import call_key

    good = call_key("D", 0, "accuracy")
    assert set(records) == {good, call_key("D", 0, "completeness")}
    assert list(bodies) == [good]
    assert json.loads(bodies[good]) == {
        "choices": [{"message": {"content": "{}"}}]}


# --- download: fixture responses of the Batches and Files endpoints -----------------------------

API = "http://127.0.0.1:8998/v1"
FIXTURE_BATCH = {"id": "batch_fixture", "object": "batch", "endpoint": "/v1/chat/completions",
                 "input_file_id": "file_in", "completion_window": "24h", "created_at": 1,
                 "request_counts": {"total": 2, "completed": 1, "failed": 1}}
FIXTURE_OUTPUT = (b'{"id": "r1", "custom_id": "D::0::accuracy", "response": {"status_code": 200, '
                  b'"body": {"choices": [{"message": {"content": "{}"}}]}}, "error": null}\n')
FIXTURE_ERRORS = (b'{"id": "r2", "custom_id": "D::0::completeness", "response": null, '
                  b'"error": {"code": "server_error", "message": "worker failed"}}\n')


def _mount_batch(router, status: str, output: str | None, errors: str | None,
                 contents: dict[str, bytes]) -> dict[str, respx.Route]:
    batch = {**FIXTURE_BATCH, "status": status, "output_file_id": output,
             "error_file_id": errors}
    router.get(f"{API}/batches/batch_fixture").respond(200, json=batch)
    return {file_id: router.get(f"{API}/files/{file_id}/content").respond(200, content=data)
            for file_id, data in contents.items()}


def _download(directory):
    import asyncio

    from judge.model import download

    config = load_config({"base_url": API, "model": "m"})
    return asyncio.run(download(config, "batch_fixture", directory,
                                http_client=httpx.AsyncClient()))


def test_download_writes_the_output_and_error_files(tmp_path):
    folder = tmp_path / "new" / "dir"
    with respx.mock(assert_all_mocked=True) as router:
        routes = _mount_batch(router, "completed", "file_out", "file_err",
                              {"file_out": FIXTURE_OUTPUT, "file_err": FIXTURE_ERRORS})
        written = _download(folder)
    assert all(route.call_count == 1 for route in routes.values())
    assert written == [folder / "batch_fixture.output.jsonl", folder / "batch_fixture.errors.jsonl"]
    assert written[0].read_bytes() == FIXTURE_OUTPUT
    assert written[1].read_bytes() == FIXTURE_ERRORS
    records = {**read_output(written[0]), **read_output(written[1])}
    assert records[("d", 0, "accuracy")].text == "{}"
    assert "worker failed" in str(records[("d", 0, "completeness")])


def test_download_of_an_expired_batch_keeps_its_partial_output(tmp_path):
    with respx.mock(assert_all_mocked=True) as router:
        _mount_batch(router, "expired", "file_out", None, {"file_out": FIXTURE_OUTPUT})
        written = _download(tmp_path)
    assert written == [tmp_path / "batch_fixture.output.jsonl"]
    assert written[0].read_bytes() == FIXTURE_OUTPUT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch_fixture.output.jsonl"]


def test_download_of_an_unfinished_batch_is_a_fatal_error(tmp_path):
    from judge.errors import ModelError

    with respx.mock(assert_all_mocked=True) as router:
        _mount_batch(router, "in_progress", None, None, {})
        with pytest.raises(ModelError, match="batch batch_fixture is in_progress, not completed"
                           ) as err:
            _download(tmp_path / "out")
    assert err.value.fatal
    assert not (tmp_path / "out").exists()


def test_cli_collect_downloads_by_batch_id(tmp_path, example_data, capsys):
    schema, dialogues, predictions = example_data
    plan = plan_evaluation(_config(tmp_path), schema, dialogues, predictions)
    output = "".join(json.dumps(line) + "\n" for line in _output_lines_from_cassette(
        plan, "example-two-dim.json")).encode()
    run = tmp_path / "run"
    with respx.mock(assert_all_mocked=True) as router:
        _mount_batch(router, "completed", "file_out", None, {"file_out": output})
        code = main(["batch", "collect", "batch_fixture", "--base-url", API,
                     "--schema", str(EXAMPLES / "schema.json"),
                     "--dialogues", str(EXAMPLES / "dialogues.jsonl"),
                     "--predictions", str(EXAMPLES / "predictions.jsonl"), "--model", "local",
                     "--out", str(run)])
    assert code == 0, capsys.readouterr().err
    assert (run / "batch_fixture.output.jsonl").read_bytes() == output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["scored_turns"] == 11 and summary["calls"]["batch_lines_missing"] == 0
