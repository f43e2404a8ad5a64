"""A JSON body's cost is bounded by what the API needs, not by the 2 MB size limit alone
(issue 36: a million small integers cost the server ~130 MB while parsed, ~190 MB for 8 at
once; a million in a job's input list took minutes to refuse). Bodies of more values than
any route takes are refused (413) before they are parsed, with or without a content type;
the largest body a route takes (100,000 dialogue ids) still reaches it; the guard's own scan
holds no per-value path; a job's input list too long is one error, not one per item.

Memory and time are not asserted from a clock here; ``bench/json_body_memory.py`` measures
the server's peak memory."""

from __future__ import annotations

import json
import tracemalloc

import httpx
import pytest
from pydantic import ValidationError

from judge._io import json_values_exceed
from judge.service import JobRequest
from judge.service.http._guard import MAX_JSON_VALUES, json_problem
from judge.service.jobs._options import MAX_IDS
from tests.service.serve_process import ServeProcess, create_token

MILLION_ZEROS = ("[" + ",".join(["0"] * 1_000_000) + "]").encode()


@pytest.mark.servers
@pytest.mark.timeout(300)
def test_a_body_of_a_million_values_is_refused_before_it_is_parsed(tmp_path):
    data = tmp_path / "serve"
    token = create_token(data, "lab")
    flags = ["--jobs", "0", "--requests-per-minute", "0"]
    ids = {"kind": "evaluate", "inputs": {},
           "options": {"dialogue_ids": [f"D{i:06d}" for i in range(MAX_IDS)]}}
    with ServeProcess(data, args=flags) as server, \
            httpx.Client(base_url=server.url, trust_env=False, timeout=120,
                         headers={"Authorization": f"Bearer {token}"}) as client:
        for body, kind in ((MILLION_ZEROS, "application/json"),
                           (b'{"kind": "evaluate", "inputs": {"schema": ' + MILLION_ZEROS + b"}}",
                            "application/json"),
                           (MILLION_ZEROS, None)):  # no type: FastAPI would read it as JSON
            headers = {"Content-Type": kind} if kind else {}
            refused = client.post("/v1/jobs", content=body, headers=headers)
            assert refused.status_code == 413, refused.text
            assert f"more than {MAX_JSON_VALUES:,} values" in refused.json()["error"]["message"]
        # the largest body a route takes passes the guard: the route answers it
        answered = client.post("/v1/jobs", json=ids)
        assert answered.status_code == 422, answered.text
        assert answered.json()["error"]["field"] == "inputs.schema"
        assert "Traceback" not in server.errors()


def test_the_value_count_is_an_upper_bound_that_strings_do_not_inflate():
    assert MAX_JSON_VALUES > MAX_IDS + 100  # a job of the most dialogue ids fits
    assert json_values_exceed(MILLION_ZEROS, MAX_JSON_VALUES)
    assert not json_values_exceed(b"[" + b",".join([b"0"] * 10) + b"]", 11)
    assert json_values_exceed(b"[" + b",".join([b"0"] * 10) + b"]", 9)
    # commas and brackets inside strings are not values
    assert not json_values_exceed(json.dumps(["a,[{" * 1000, "b"]).encode(), 5)
    assert not json_values_exceed(json.dumps({"k": 'x\\",' * 500}).encode(), 3)


def test_the_guards_scan_holds_no_path_per_value():
    """Before: a tuple and a path string for every value (about 150 bytes each). Now what is
    held beside the parsed body is one iterator per open container."""
    body = ("[" + ",".join(["1"] * 100_000) + "]").encode()
    parsed = json.loads(body)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        json.loads(body)
        parse_only = tracemalloc.get_traced_memory()[1] - start
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        assert json_problem(body) is None
        scan = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert parsed and scan < parse_only * 2 + 200_000, (scan, parse_only)
    # and the problem's path is still the JSON path of the value
    assert json_problem(b'{"a": [0, {"b": [1, 2, NaN]}], "c": 1}')[1] == "a[1].b[2]"
    assert json_problem(b'[0, 1, 99999999999999999999]')[1] == "[2]"


def test_a_job_input_list_too_long_is_one_error_not_one_per_item():
    with pytest.raises(ValidationError) as refused:
        JobRequest.model_validate({"kind": "metrics", "inputs": {"predictions": [0] * 50_000}})
    assert refused.value.error_count() <= 3, refused.value.error_count()
    with pytest.raises(ValidationError) as many:
        JobRequest.model_validate({"kind": "metrics",
                                   "inputs": {f"k{i}": 0 for i in range(50_000)}})
    assert many.value.error_count() <= 3, many.value.error_count()
