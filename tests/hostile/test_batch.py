"""The Batch API path under hostile conditions, against the fake server's Files and Batches
endpoints (tests/fault_server.py), which bill every request line like a live call.

Request files are split at the limits and carry each distinct body once; ``collect`` merges
every batch and fans shared answers out; a 401 that echoes the key stops submit, status and
collect with a redacted message; hostile output lines are error rows or input errors naming
file, line and field, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..fault_server import HOSTILE_REPLIES, Decision, Hostile, body_hash, result_keys
from .conftest import (
    DIALOGUE,
    PREDICTION,
    SCHEMA,
    Data,
    check_bad_input,
    check_clean,
    jsonl,
)
from .test_replies import JUDGED, REASONS


@pytest.fixture
def twins(tmp_path: Path) -> Data:
    """Six dialogues: three pairs whose turns (and so request bodies) are identical."""
    dialogues, predictions = [], []
    for n in range(6):
        name = f"T{n}"
        user = f"i need a cheap place to stay in the north , plan {n // 2} ."
        turn = {**DIALOGUE["turns"][0], "user": user}
        dialogues.append({**DIALOGUE, "dialogue_id": name, "turns": [turn]})
        predictions.append({**PREDICTION, "dialogue_id": name})
    return Data(SCHEMA, jsonl(tmp_path / "in" / "dialogues.jsonl", dialogues),
                jsonl(tmp_path / "in" / "predictions.jsonl", predictions))


def test_split_submit_status_collect_pays_each_distinct_body_once(hostile_server, twins,
                                                                  tmp_path, run_cli):
    hostile_server.stats.reset()
    requests = tmp_path / "batch" / "requests.jsonl"
    prepared = run_cli("batch", "prepare", *twins.args(), "--model", "fault-model",
                       "--out", str(requests), "--batch-max-requests", "2")
    check_clean(prepared, tmp_path)
    assert prepared.code == 0, prepared.err
    parts = sorted(requests.parent.glob("requests-*.jsonl"))
    assert [p.name for p in parts] == ["requests-001.jsonl", "requests-002.jsonl",
                                       "requests-003.jsonl"]
    lines = [json.loads(x) for p in parts for x in p.read_text().splitlines()]
    assert len(lines) == 6  # 12 calls, 6 distinct bodies
    assert len({body_hash(x["body"]) for x in lines}) == 6
    assert "6 calls share a body" in prepared.out

    api = ["--base-url", hostile_server.url, "--max-retries", "0"]
    submitted = run_cli("batch", "submit", str(requests.parent), *api)
    check_clean(submitted, tmp_path)
    assert submitted.code == 0, submitted.err
    record = requests.parent / "batches.json"
    batches = json.loads(record.read_text())["batches"]
    assert [b["requests"] for b in batches] == [2, 2, 2]
    again = run_cli("batch", "submit", str(requests.parent), *api)
    assert again.code == 2 and "--resubmit" in again.err  # never paid for twice by mistake

    status = run_cli("batch", "status", "--record", str(record), *api)
    check_clean(status, tmp_path)
    assert status.code == 0 and " ".join(status.out.split()).count("completed (2 done") == 3

    out = tmp_path / "run"
    collected = run_cli("batch", "collect", "--record", str(record), *twins.args(),
                        "--model", "fault-model", "--out", str(out), *api)
    check_clean(collected, tmp_path)
    assert collected.code == 0, collected.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored_turns"] == 6 and summary["error_turns"] == 0
    assert summary["calls"]["batch_lines_shared"] == 6
    assert summary["tokens"]["prompt_tokens"] == sum(
        1 + sum(len(m["content"]) for m in x["body"]["messages"]) // 4 for x in lines)
    stats = hostile_server.snapshot()
    assert stats["completed"] == 6 and stats["max_completed_per_body"] == 1


def test_a_batch_whose_record_was_lost_is_found_at_the_provider_not_paid_again(
        hostile_server, twins, tmp_path, run_cli):
    """The record file is lost after submitting (or the creation's reply was): submitting
    the same files again records the batches the provider already has, by the file digest
    each carries; ``--resubmit`` pays again on purpose."""
    requests = tmp_path / "batch" / "requests.jsonl"
    assert run_cli("batch", "prepare", *twins.args(), "--model", "fault-model", "--out",
                   str(requests), "--batch-max-requests", "3").code == 0
    api = ["--base-url", hostile_server.url, "--max-retries", "0"]
    record = requests.parent / "batches.json"
    assert run_cli("batch", "submit", str(requests.parent), *api).code == 0
    first = json.loads(record.read_text())["batches"]
    paid = hostile_server.snapshot()["completed"]
    record.unlink()
    again = run_cli("batch", "submit", str(requests.parent), *api)
    check_clean(again, tmp_path)
    assert again.code == 0, again.err
    # rich wraps lines at 80 columns; the paths (longer under xdist) move the break
    assert " ".join(again.out.split()).count("not paid again") == len(first) == 2
    adopted = json.loads(record.read_text())["batches"]
    assert [b["id"] for b in adopted] == [b["id"] for b in first]
    assert hostile_server.snapshot()["completed"] == paid
    record.unlink()
    assert run_cli("batch", "submit", str(requests.parent), "--resubmit", *api).code == 0
    fresh = json.loads(record.read_text())["batches"]
    assert not {b["id"] for b in fresh} & {b["id"] for b in first}
    assert hostile_server.snapshot()["completed"] == paid + 6


def test_one_file_when_under_the_limits_and_stale_parts_removed(hostile_server, twins,
                                                                tmp_path, run_cli):
    requests = tmp_path / "requests.jsonl"
    first = run_cli("batch", "prepare", *twins.args(), "--out", str(requests),
                    "--batch-max-requests", "2")
    assert first.code == 0 and len(list(tmp_path.glob("requests-*.jsonl"))) >= 2
    second = run_cli("batch", "prepare", *twins.args(), "--out", str(requests))
    check_clean(second, tmp_path)
    assert second.code == 0
    assert list(tmp_path.glob("requests-*.jsonl")) == []  # stale parts never get submitted
    assert len(requests.read_text().splitlines()) == 6


@pytest.mark.parametrize("step", ["submit", "status", "collect"])
def test_a_401_that_echoes_the_key_is_redacted(step, hostile_server, data, tmp_path, run_cli):
    base = f"{hostile_server.url.removesuffix('/v1')}/hostile/http-401-echo/v1"
    requests = jsonl(tmp_path / "requests.jsonl", [{"custom_id": "H1::0::accuracy"}])
    api = ["--base-url", base, "--max-retries", "0"]
    argv = {"submit": ["batch", "submit", str(requests), *api],
            "status": ["batch", "status", "batch_1", *api],
            "collect": ["batch", "collect", "batch_1", *data.args(), "--out",
                        str(tmp_path / "run"), *api]}[step]
    outcome = run_cli(*argv)
    check_clean(outcome, tmp_path)
    assert outcome.code != 0
    assert "401" in outcome.err and "<redacted>" in outcome.err


def _body_text(content: bytes) -> str:
    """A reply body as it would sit in an output line: JSON as sent, anything else quoted."""
    text = content.decode("utf-8", "replace")
    try:
        json.loads(text)
    except RecursionError:  # JSON, only too deep for this reader
        return text
    except ValueError:
        return json.dumps(text)
    return text


def _output_line(kind: str, body: dict, custom_id: str, token: str) -> str:
    decision = Decision(body_hash(body), body_hash(body), "ok", result_keys(body))
    answer = HOSTILE_REPLIES[kind](Hostile(body, decision, 1, token, 1))
    return (f'{{"id": "batch_req", "custom_id": {json.dumps(custom_id)}, "response": '
            f'{{"status_code": {answer.status}, "body": {_body_text(answer.content)}}}, '
            f'"error": null}}\n')


BATCH_KINDS = [k for k in HOSTILE_REPLIES
               if not k.startswith(("gzip-", "deflate-", "encoding-", "slow-", "http-429",
                                    "ratelimit-", "size-50mb"))]
"""Entries that mean something in an output file (encodings and headers belong to HTTP)."""


@pytest.mark.parametrize("kind", BATCH_KINDS)
def test_hostile_batch_output_lines(kind, hostile_server, data, tmp_path, run_cli, canary):
    requests = tmp_path / "requests.jsonl"
    assert run_cli("batch", "prepare", *data.args(), "--out", str(requests)).code == 0
    output = tmp_path / "output.jsonl"
    output.write_text("".join(_output_line(kind, x["body"], x["custom_id"], canary)
                              for x in map(json.loads, requests.read_text().splitlines())),
                      encoding="utf-8")
    out = tmp_path / "run"
    outcome = run_cli("batch", "collect", "--output-file", str(output), *data.args(),
                      "--out", str(out))
    check_clean(outcome, tmp_path / "run")
    assert "Traceback" not in outcome.err
    if kind in JUDGED:
        assert outcome.code == 0, outcome.err
    elif kind in REASONS:
        assert outcome.code != 0
        calls = [c for row in map(json.loads, (out / "judgments.jsonl").read_text()
                                  .split("\n")[:-1]) for c in row["calls"]]
        assert all(c["error"] and c["results"] is None for c in calls)
    else:
        assert outcome.code in (0, 1, 2, 4)


BAD_LINES = {
    "not-json": ("{not json", None),
    "deep": ("[" * 100_000 + "]" * 100_000, None),
    "array": ("[1, 2]", "custom_id"),
    "no-custom-id": (json.dumps({"response": {}}), "custom_id"),
    "custom-id-number": (json.dumps({"custom_id": 5}), "custom_id"),
    "custom-id-shape": (json.dumps({"custom_id": "[/x]\x1b[31m"}), "custom_id"),
    "no-response": (json.dumps({"custom_id": "H1::0::accuracy"}), "response"),
    "response-list": (json.dumps({"custom_id": "H1::0::accuracy", "response": [1]}),
                      "response"),
}


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_malformed_output_file_lines_name_file_line_and_field(name, data, tmp_path, run_cli):
    text, field = BAD_LINES[name]
    output = tmp_path / "output.jsonl"
    output.write_text("\n" + text + "\n", encoding="utf-8")
    outcome = run_cli("batch", "collect", "--output-file", str(output), *data.args(),
                      "--out", str(tmp_path / "run"))
    check_bad_input(outcome, tmp_path, names=output, line=2, field=field)


ODD_LINES = {
    "status-string": {"response": {"status_code": "200", "body": {}}},
    "status-bool": {"response": {"status_code": True, "body": {}}},
    "error-list": {"error": ["boom", "[/x]"]},
    "error-echo": {"error": {"message": "key {key} was wrong"}},
    "body-echo-500": {"response": {"status_code": 500, "body": {"error": {"message": "{key}"}}}},
    "body-string-500": {"response": {"status_code": 500, "body": "\x1b[2J{key}"}},
    "huge-line": {"response": {"status_code": 200, "body": {"pad": "x" * 1_200_000}}},
}


@pytest.mark.parametrize("name", list(ODD_LINES))
def test_odd_output_lines_are_error_rows(name, data, tmp_path, run_cli, canary):
    line = json.loads(json.dumps(ODD_LINES[name]).replace("{key}", canary))
    output = jsonl(tmp_path / "output.jsonl", [
        {"custom_id": f"H1::0::{dimension}", **line}
        for dimension in ("accuracy", "completeness")])
    out = tmp_path / "run"
    outcome = run_cli("batch", "collect", "--output-file", str(output), *data.args(),
                      "--out", str(out))
    check_clean(outcome, out)
    assert outcome.code == 4, outcome.err  # nothing could be judged


def test_several_systems_share_the_batches_and_match_a_live_run(hostile_server, twins,
                                                                tmp_path, run_cli):
    """Two systems on the twins: one set of batches carries each distinct body once; each
    system's collected rows are those a live run of both on the same server gives."""
    other = jsonl(tmp_path / "in" / "other.jsonl", [
        {**PREDICTION, "dialogue_id": f"T{n}", "system_name": "other-dst", "turns": [
            {"turn_index": 0, "pred_state": {"hotel-area": "north"}}]} if n < 2 else
        {**PREDICTION, "dialogue_id": f"T{n}", "system_name": "other-dst"} for n in range(6)])
    data = [*twins.args(), str(other), "--model", "fault-model"]
    api = ["--base-url", hostile_server.url, "--max-retries", "0"]
    requests = tmp_path / "batch" / "requests.jsonl"
    hostile_server.stats.reset()
    prepared = run_cli("batch", "prepare", *data, "--out", str(requests),
                       "--batch-max-requests", "2")
    check_clean(prepared, tmp_path)
    assert prepared.code == 0, prepared.err
    lines = [json.loads(x) for p in sorted(requests.parent.glob("requests-*.jsonl"))
             for x in p.read_text().splitlines()]
    # 24 calls; each system alone has 6 distinct bodies (3 pairs of twins, 2 dimensions);
    # the other's T0/T1 pair differs from the first's: 2 more
    assert len(lines) == len({body_hash(x["body"]) for x in lines}) == 8
    assert "24 calls, 8 distinct requests" in " ".join(prepared.out.split())
    assert "would hold 12 (saving 33.3%)" in " ".join(prepared.out.split())
    assert run_cli("batch", "submit", str(requests.parent), *api).code == 0
    runs = tmp_path / "runs"
    collected = run_cli("batch", "collect", "--record", str(requests.parent / "batches.json"),
                        *data, "--out", str(runs), *api)
    check_clean(collected, tmp_path)
    assert collected.code == 0, collected.err
    stats = hostile_server.snapshot()
    assert stats["completed"] == 8 and stats["max_completed_per_body"] == 1
    assert sorted(p.name for p in runs.glob("*.output.jsonl")) == [
        f"{b['id']}.output.jsonl" for b in
        sorted(json.loads((requests.parent / "batches.json").read_text())["batches"],
               key=lambda b: b["id"])]  # downloads kept beside the systems' directories

    live = tmp_path / "live"
    evaluated = run_cli("evaluate", *data, "--out", str(live), "--no-cache", "--no-progress",
                        *api)
    assert evaluated.code == 0, evaluated.err
    for name in ("hostile-dst", "other-dst"):
        summary = json.loads((runs / name / "summary.json").read_text())
        assert summary["scored_turns"] == 6 and summary["error_turns"] == 0
        batch_rows = (runs / name / "judgments.jsonl").read_text().splitlines()
        live_rows = (live / name / "judgments.jsonl").read_text().splitlines()
        assert [_verdicts(json.loads(r)) for r in batch_rows] == \
            [_verdicts(json.loads(r)) for r in live_rows]


def _verdicts(row: dict) -> dict:
    """A judgments row without how its calls travelled (attempt metadata)."""
    return {**row, "calls": [{k: v for k, v in c.items() if k != "attempts"}
                             | {"replies": [a["text"] for a in c["attempts"]]}
                             for c in row["calls"]]}
