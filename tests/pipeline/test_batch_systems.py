"""Several systems through the Batch API (issue 13, deliverable 3): one set of request files
carries each distinct body once, and collecting answers every system's calls from it with the
results a batch of its own would give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge import load_config, load_predictions
from judge.cli import main
from judge.errors import OptionError
from judge.model import read_output
from judge.pipeline import collect, collect_systems, plan_evaluation, system_dirs, write_requests

from ..conftest import EXAMPLES
from ..fault_server import body_hash, result_keys
from .test_systems import _comparable

PATHS = [EXAMPLES / "predictions.jsonl", EXAMPLES / "predictions-weak.jsonl"]
DATA = ["--schema", str(EXAMPLES / "schema.json"), "--dialogues",
        str(EXAMPLES / "dialogues.jsonl"), "--model", "m"]
SAME = ("tsa", "judge_jga", "judge_jga_turns", "rule", "turns", "scored_turns", "error_turns",
        "errors")
"""Summary figures that depend on the answers only (not on who paid for them)."""


def _lines(paths: list[Path]) -> list[dict]:
    return [json.loads(x) for p in paths for x in p.read_text().splitlines()]


def fixture_reply(body: dict) -> dict:
    """A hand-written batch answer for one request body: a verdict that depends on the body
    (some bodies flag a slot), its digest in the explanation, and a failed request for some."""
    digest = body_hash(body)
    if digest[0] in "01":
        return {"status_code": 500, "body": {"error": {"message": "fixture failure"}}}
    flagged = {"hotel-area": "fixture"} if digest[0] in "2345" else {}
    content = json.dumps({"explanation": f"fixture {digest}",
                          **{key: flagged for key in result_keys(body)}})
    return {"status_code": 200, "body": {
        "id": f"chatcmpl-{digest[:8]}", "object": "chat.completion", "created": 0,
        "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}}


def fixture_output(requests: list[Path], out: Path) -> Path:
    """The output file a finished batch of these request files would hold (fixture replies)."""
    out.write_text("".join(
        json.dumps({"id": f"batch_req_{n}", "custom_id": line["custom_id"],
                    "response": fixture_reply(line["body"]), "error": None}) + "\n"
        for n, line in enumerate(_lines(requests))), encoding="utf-8")
    return out


@pytest.fixture
def systems(example_data):
    schema, dialogues, _ = example_data
    return [load_predictions(p, dialogues, schema) for p in PATHS]


def _plans(tmp_path, example_data, systems, **values):
    schema, dialogues, _ = example_data
    config = load_config({"model": "m", "cache_dir": str(tmp_path / "cache"), **values})
    return config, [plan_evaluation(config, schema, dialogues, s) for s in systems]


def test_prepare_writes_each_distinct_body_once_across_systems(tmp_path, example_data,
                                                               systems):
    _, plans = _plans(tmp_path, example_data, systems, batch_max_requests=10)
    names = system_dirs(systems)
    together = write_requests(plans, tmp_path / "both" / "requests.jsonl", names=names)
    alone = [write_requests(p, tmp_path / name / "requests.jsonl")
             for p, name in zip(plans, names, strict=True)]
    lines = _lines(together.files)
    distinct = {body_hash(c.body) for p in plans for c in p.calls}
    assert len(lines) == together.requests == len(distinct) == 42
    assert {body_hash(x["body"]) for x in lines} == distinct
    assert together.separate == sum(a.requests for a in alone) == 44
    assert together.requests < together.separate
    assert together.calls == 44 and together.duplicates == 2
    assert together.counts == [10, 10, 10, 10, 2]  # split at the limit as for one system
    ids = [x["custom_id"] for x in lines]
    assert len(set(ids)) == len(ids)
    assert {i.split("::")[0] for i in ids} == {"example-dst", "weaker-dst"}
    assert all(i.startswith("example-dst::") for i in ids[:22])  # the first system's bodies
    with pytest.raises(OptionError, match="name each"):
        write_requests(plans, tmp_path / "r.jsonl")


def test_collect_gives_each_system_the_results_of_its_own_batch(tmp_path, example_data,
                                                                 systems):
    schema, dialogues, _ = example_data
    config, plans = _plans(tmp_path, example_data, systems)
    names = system_dirs(systems)
    shared = write_requests(plans, tmp_path / "both.jsonl", names=names)
    records = read_output(fixture_output(shared.files, tmp_path / "both.output.jsonl"))
    together = collect_systems(config, schema, dialogues, systems, records,
                               out_dir=tmp_path / "runs")
    for system, plan, joint, name in zip(systems, plans, together, names, strict=True):
        own = write_requests(plan, tmp_path / f"{name}.jsonl")
        alone = collect(config, schema, dialogues, system, read_output(
            fixture_output(own.files, tmp_path / f"{name}.output.jsonl")))
        assert [_comparable(r) for r in joint.rows] == [_comparable(r) for r in alone.rows]
        for key in SAME:
            assert joint.summary[key] == alone.summary[key], key
        assert joint.summary["calls"]["batch_lines_missing"] == 0
        assert joint.summary["calls"]["batch_lines_unused"] == 0
        written = json.loads((tmp_path / "runs" / name / "summary.json").read_text())
        assert written["tsa"] == alone.summary["tsa"] and written["data"]["system"] == name
    # the fixture answers vary: some error rows, some flagged turns, some clean ones
    assert 0 < together[1].summary["error_turns"] < together[1].summary["turns"]
    assert together[0].summary["tsa"] != together[1].summary["tsa"]
    # the weak system's two calls that share a body were answered by the other's lines;
    # those answered (not failed) are marked as not billed again
    assert [j.summary["calls"]["batch_lines_shared"] for j in together] == [0, 2]
    first = {body_hash(c.body) for c in plans[0].calls}
    twins = [c.body for c in plans[1].calls if body_hash(c.body) in first]
    copies = [a for row in together[1].rows for c in row["calls"] for a in c["attempts"]
              if a.get("cached")]
    assert len(twins) == 2
    assert len(copies) == sum(fixture_reply(b)["status_code"] == 200 for b in twins)


def test_collect_from_lines_of_separate_batches_misses_nothing_but_their_ids(
        tmp_path, example_data, systems):
    """Lines of a single system's batch carry plain ids, which say nothing of the system:
    collecting several systems reports them unused rather than guessing."""
    schema, dialogues, _ = example_data
    config, plans = _plans(tmp_path, example_data, systems)
    own = write_requests(plans[0], tmp_path / "one.jsonl")
    records = read_output(fixture_output(own.files, tmp_path / "one.output.jsonl"))
    results = collect_systems(config, schema, dialogues, systems, records)
    assert all(r.summary["calls"]["batch_lines_unused"] == 22 for r in results)
    assert all(r.summary["error_turns"] == r.summary["turns"] for r in results)


def test_cli_prepare_and_collect_several_systems(tmp_path, capsys):
    folder = tmp_path / "systems"
    folder.mkdir()
    for path in PATHS:
        (folder / path.name).write_bytes(path.read_bytes())
    requests = tmp_path / "batch" / "requests.jsonl"
    assert main(["batch", "prepare", *DATA, "--predictions", str(folder),
                 "--out", str(requests)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "2 systems (weaker-dst, example-dst): 44 calls, 42 distinct requests" in out
    assert "would hold 44 (saving 4.5%)" in out
    output = fixture_output([requests], tmp_path / "batch" / "output.jsonl")
    runs = tmp_path / "runs"
    # the files named in another order than the directory gave them: ids name the system
    code = main(["batch", "collect", "--output-file", str(output), *DATA,
                 "--predictions", *map(str, PATHS), "--out", str(runs)])
    captured = capsys.readouterr()
    captured_out = " ".join(captured.out.split())
    assert code == 1  # the fixture's failed requests are error rows
    assert "some turns are error rows (error_rows)" in captured.err
    assert "2 systems, 44 calls: 42 answered by their own line, 2 by the line of a call " \
           "with the same body, 0 without a line" in captured_out
    for name in ("example-dst", "weaker-dst"):
        manifest = json.loads((runs / name / "manifest.json").read_text())
        assert manifest["kind"] == "batch"
        assert len((runs / name / "judgments.jsonl").read_text().splitlines()) == 11
