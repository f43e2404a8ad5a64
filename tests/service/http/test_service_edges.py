"""Edges of the service that a sampled mutation run (``python bench/mutation.py all --sample
250``) showed no test held: what cancel and resume do in each state, an option's field in its
422, where a JSON Lines upload's first line may end, and a stored file larger than one
unpacking block."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from judge._errors import ServiceError
from judge.service.auth._auth import ensure_project
from judge.service.db._db import jobs, judgments
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import _agreement_options
from judge.service.storage._files import _gunzip_to
from judge.service.storage._unpack import _is_json_lines
from tests.service import hostile
from tests.service.conftest import count_rows, insert_job

STATES = ("queued", "running", "waiting", "stopped", "failed", "cancelled", "succeeded")


def _job(db, status: str) -> tuple[str, str]:
    project_id = ensure_project(db, "lab")
    job_id = f"job_{status}"
    insert_job(db, job_id, project_id, "tok_x", status)
    return project_id, job_id


def _state(db, job_id: str) -> tuple[str, bool]:
    with db.read() as conn:
        row = conn.execute(sa.select(jobs.c.status, jobs.c.cancel_requested)
                           .where(jobs.c.id == job_id)).first()
    return row.status, bool(row.cancel_requested)


@pytest.mark.parametrize("status, after", [
    ("queued", ("cancelled", True)), ("stopped", ("cancelled", True)),
    ("running", ("running", True)),   # its worker stops it within a heartbeat
    ("waiting", ("waiting", True)),   # the worker that wakes it cancels its batches first
    ("failed", ("failed", False)), ("cancelled", ("cancelled", False)),
    ("succeeded", ("succeeded", False))])
def test_cancel_ends_a_waiting_job_at_once_and_asks_a_running_one_to_stop(db, status, after):
    project_id, job_id = _job(db, status)
    answer = JobStore(db).cancel(project_id, job_id)
    assert _state(db, job_id) == after
    assert answer["status"] == after[0]


@pytest.mark.parametrize("status", STATES)
def test_only_a_stopped_failed_or_cancelled_job_resumes(db, status):
    project_id, job_id = _job(db, status)
    store = JobStore(db)
    if status in ("stopped", "failed", "cancelled"):
        assert store.resume(project_id, job_id, None)["status"] == "queued"
        return
    with pytest.raises(ServiceError) as refused:
        store.resume(project_id, job_id, None)
    assert refused.value.status == 409
    assert refused.value.reason == (f"job is {status}; only a stopped, failed or cancelled "
                                    "job can resume")
    assert _state(db, job_id)[0] == status


@pytest.mark.parametrize("options, field", [
    ({"seed": 1.5}, "options.seed"), ({"seed": True}, "options.seed"),
    ({"n_boot": -1}, "options.n_boot"), ({"confidence": 1.0}, "options.confidence")])
def test_an_agreement_option_out_of_its_type_names_its_field(options, field):
    with pytest.raises(ServiceError) as refused:
        _agreement_options(options)
    assert (refused.value.status, refused.value.field) == (422, field)


def test_a_first_line_may_be_exactly_as_long_as_the_record_cap(tmp_path: Path):
    """A JSON Lines file is recognised by a first line that holds one object no longer than
    the cap: a line of the cap's length is one, a byte more is not."""
    line = b'{"a": "' + b"x" * 90 + b'"}\n'
    path = tmp_path / "f.jsonl"
    path.write_bytes(line + line)
    assert _is_json_lines(path, len(line)) is True
    assert _is_json_lines(path, len(line) - 1) is False


def test_a_stored_file_larger_than_one_block_is_unpacked_whole(tmp_path: Path):
    """Blobs are unpacked block by block (64 KiB): a file of several blocks, and one packed
    as two gzip members, come back byte for byte."""
    content = os.urandom(100_000).hex().encode()  # 200 kB, about 2:1 in gzip
    target = tmp_path / "out"
    _gunzip_to(gzip.compress(content), target)
    assert target.read_bytes() == content
    _gunzip_to(gzip.compress(content[:1000]) + gzip.compress(content[1000:]), target)
    assert target.read_bytes() == content


def test_judgments_filter_by_error_verdict_and_dialogue_and_read_in_batches(db):
    """The results filters each keep exactly their rows, in run order, across batches."""
    project_id, job_id = _job(db, "succeeded")
    rows = [{"job_id": job_id, "seq": seq, "dialogue_id": f"d{seq % 3}", "turn_index": seq,
             "verdict": None if seq % 5 == 0 else seq % 2 == 0, "has_error": seq % 5 == 0,
             "row": {"seq": seq}} for seq in range(23)]
    with db.write() as conn:
        conn.execute(judgments.insert(), rows)
    store = JobStore(db)

    def seqs(**filters):
        return [r["seq"] for r in store.judgments(project_id, job_id, batch=4, **filters)]

    assert seqs() == list(range(23))
    assert seqs(error=True) == [s for s in range(23) if s % 5 == 0]
    assert seqs(error=False) == [s for s in range(23) if s % 5]
    assert seqs(verdict=True) == [s for s in range(23) if s % 5 and s % 2 == 0]
    assert seqs(dialogue_id="d1", error=False) == [s for s in range(23) if s % 3 == 1 and s % 5]
    assert seqs(offset=20) == [20, 21, 22] and seqs(limit=2) == [0, 1]
    with pytest.raises(ServiceError) as refused:
        list(store.judgments(ensure_project(db, "other"), job_id))
    assert refused.value.status == 404


BAD_ROWS = [
    ({"turn_index": 0, "verdict": True, "rule": "1"}, "dialogue_id", "lacks this field"),
    ({**hostile.GOOD_ROW, "dialogue_id": ""}, "dialogue_id", "string of 1 to 300"),
    ({**hostile.GOOD_ROW, "dialogue_id": "d" * 301}, "dialogue_id", "string of 1 to 300"),
    ({**hostile.GOOD_ROW, "dialogue_id": 7}, "dialogue_id", "string of 1 to 300"),
    ({**hostile.GOOD_ROW, "turn_index": -1}, "turn_index", "whole number from 0 to"),
    ({**hostile.GOOD_ROW, "turn_index": 2 ** 31}, "turn_index", "whole number from 0 to"),
    ({**hostile.GOOD_ROW, "turn_index": True}, "turn_index", "whole number from 0 to"),
    ({**hostile.GOOD_ROW, "turn_index": "1"}, "turn_index", "whole number from 0 to"),
]


@pytest.mark.parametrize("row, field, says", BAD_ROWS,
                         ids=[f"{f}-{n}" for n, (_, f, _) in enumerate(BAD_ROWS)])
def test_a_bundle_row_out_of_shape_is_a_422_naming_line_and_field(service_env, row, field,
                                                                  says):
    """An imported bundle's judgment rows are checked one by one: the 422 names the member,
    the line and the field, and no job is made."""
    api, service = service_env["api"], service_env["service"]
    before = count_rows(service.db, jobs)
    lines = json.dumps(hostile.GOOD_ROW) + "\n" + json.dumps(row) + "\n"
    answer = api.post("/v1/bundles", files={"file": (
        "b.tar.gz", hostile.good_bundle(**{"judgments.jsonl": lines.encode()}))})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["field"] == field and "judgments.jsonl:2: " in error["message"]
    assert says in error["message"]
    assert count_rows(service.db, jobs) == before


def test_a_bundle_of_more_rows_than_one_insert_batch_is_imported_whole(service_env):
    """Judgment rows go in 500 at a time: a bundle of 1,201 rows arrives with every row."""
    api = service_env["api"]
    rows = "".join(json.dumps({**hostile.GOOD_ROW, "turn_index": n}) + "\n"
                   for n in range(1201))
    answer = api.post("/v1/bundles", files={"file": (
        "b.tar.gz", hostile.good_bundle(**{"judgments.jsonl": rows.encode()}))})
    assert answer.status_code == 201, answer.text
    lines = api.get(f"/v1/jobs/{answer.json()['id']}/judgments").text.splitlines()
    assert [json.loads(line)["turn_index"] for line in lines] == list(range(1201))
