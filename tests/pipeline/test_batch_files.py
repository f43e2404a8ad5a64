"""Batch API request files (judge/pipeline/_batch.py): split at the limits, each distinct body
once, answers fanned out to every call with that body when collected."""

from __future__ import annotations

import json

import pytest

from judge import load_config
from judge.errors import ModelError, OptionError
from judge.model import Completion, call_key
from judge.pipeline import collect, fan_out, plan_evaluation, write_requests

from ..fault_server import body_hash


def _plan(tmp_path, example_data, **values):
    config = load_config({"model": "m", "cache_dir": str(tmp_path / "cache"), **values})
    return plan_evaluation(config, *example_data)


def _lines(paths):
    return [json.loads(x) for p in paths for x in p.read_text().splitlines()]


def test_split_at_the_request_limit_in_plan_order(tmp_path, example_data):
    plan = _plan(tmp_path, example_data, batch_max_requests=5)
    written = write_requests(plan, tmp_path / "requests.jsonl")
    assert [p.name for p in written.files] == [f"requests-00{n}.jsonl" for n in range(1, 6)]
    assert written.counts == [5, 5, 5, 5, 2] and written.requests == len(plan.calls) == 22
    assert [x["custom_id"] for x in _lines(written.files)] == [c.custom_id for c in plan.calls]
    assert written.sizes == [p.stat().st_size for p in written.files]
    assert not (tmp_path / "requests.jsonl").exists()


def test_split_at_the_byte_limit(tmp_path, example_data):
    plan = _plan(tmp_path, example_data, batch_max_bytes=20_000)
    written = write_requests(plan, tmp_path / "r.jsonl")
    assert len(written.files) > 1 and max(written.sizes) <= 20_000
    assert len(_lines(written.files)) == 22
    with pytest.raises(OptionError, match="alone has"):
        write_requests(_plan(tmp_path, example_data), tmp_path / "r.jsonl", max_bytes=1000)


def test_identical_bodies_are_written_once_and_answered_for_all(tmp_path, example_data):
    plan = _plan(tmp_path, example_data)
    calls = plan.calls
    twin = calls[3]
    calls[5].body = twin.body  # as if two turns had the same history and state
    written = write_requests(plan, tmp_path / "r.jsonl")
    assert written.duplicates == 1 and written.requests == 21
    answer = Completion('{"explanation": "x", "incorrect_domain_slot": {}}', "stop",
                        usage={"prompt_tokens": 10, "completion_tokens": 1})
    records = {call_key(twin.dialogue_id, twin.turn_index, twin.dimension): answer}
    shared = fan_out(plan, records)
    copy = shared[call_key(calls[5].dialogue_id, calls[5].turn_index, calls[5].dimension)]
    assert copy.text == answer.text and copy.cached and not answer.cached  # billed once
    failure = ModelError("boom")
    failed = fan_out(plan, {call_key(twin.dialogue_id, twin.turn_index, twin.dimension): failure})
    assert failed[call_key(calls[5].dialogue_id, calls[5].turn_index, calls[5].dimension)] \
        is failure


def test_collect_fans_out_and_counts_shared_lines(tmp_path, example_data):
    plan = _plan(tmp_path, example_data)
    first = {}
    records = {}
    for call in plan.calls:
        digest = body_hash(call.body)
        key = call_key(call.dialogue_id, call.turn_index, call.dimension)
        if digest in first:
            continue
        first[digest] = key
        records[key] = Completion(json.dumps({"explanation": "ok",
                                              "incorrect_domain_slot": {},
                                              "missed_domain_slot": {}}), "stop")
    dropped = next(iter(records))
    del records[dropped]
    result = collect(plan.config, *example_data, records)
    assert result.summary["calls"]["batch_lines_missing"] == 1
    assert result.summary["calls"]["batch_lines_shared"] == 0


def test_stale_parts_of_an_earlier_split_are_removed(tmp_path, example_data):
    target = tmp_path / "requests.jsonl"
    write_requests(_plan(tmp_path, example_data, batch_max_requests=5), target)
    (tmp_path / "requests-notes.jsonl").write_text("mine\n")  # not ours: kept
    written = write_requests(_plan(tmp_path, example_data, batch_max_requests=10), target)
    assert [p.name for p in written.files] == ["requests-001.jsonl", "requests-002.jsonl",
                                               "requests-003.jsonl"]
    assert sorted(p.name for p in tmp_path.glob("requests-*.jsonl")) == [
        "requests-001.jsonl", "requests-002.jsonl", "requests-003.jsonl", "requests-notes.jsonl"]
    single = write_requests(_plan(tmp_path, example_data), target)
    assert single.files == [target]
    assert sorted(p.name for p in tmp_path.glob("requests-*.jsonl")) == ["requests-notes.jsonl"]


def test_calls_answered_elsewhere_get_no_line(tmp_path, example_data):
    """``answered`` (a ledger holds their replies): those calls are left out, and a split
    counts only the lines written."""
    plan = _plan(tmp_path, example_data, batch_max_requests=10)
    left_out = {c.custom_id for c in plan.calls[:7]}
    written = write_requests(plan, tmp_path / "r.jsonl", answered=left_out)
    ids = [x["custom_id"] for x in _lines(written.files)]
    assert ids == [c.custom_id for c in plan.calls[7:]]
    assert written.answered == 7 and written.calls == 22 and written.counts == [10, 5]
    everything = write_requests(plan, tmp_path / "all.jsonl",
                                answered={c.custom_id for c in plan.calls})
    assert everything.requests == 0 and everything.answered == 22
