"""The reads the pages use (``judge.service.JudgmentReads``): slim rows without their bulk,
one dialogue in full, and nothing of another project's run."""

from __future__ import annotations

from judge.service import JudgmentReads


def test_slim_rows_leave_out_the_bulk_and_keep_run_order(web, synthetic_run):
    service = web["service"]
    reads = JudgmentReads(service)
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    full = list(service.jobs.judgments(project, synthetic_run))
    slim = list(reads.slim_rows(project, synthetic_run, batch=7))
    assert [seq for seq, _ in slim] == list(range(len(full))) and len(full) == 160
    for (_, row), whole in zip(slim, full, strict=True):
        assert "calls" not in row and "trace" not in row and "state" not in row
        assert row == {k: v for k, v in whole.items() if k not in ("calls", "trace", "state")}
    window = list(reads.slim_rows(project, synthetic_run, start=50, stop=53))
    assert [seq for seq, _ in window] == [50, 51, 52]


def test_one_dialogue_in_full_and_nothing_of_another_project(web, synthetic_run):
    service = web["service"]
    reads = JudgmentReads(service)
    project = service.tokens.resolve_token(web["tokens"]["alice"]).project_id
    other = service.tokens.resolve_token(web["tokens"]["eve"]).project_id
    first = next(service.jobs.judgments(project, synthetic_run))
    rows = reads.dialogue_rows(project, synthetic_run, first["dialogue_id"])
    assert rows[0] == first and rows[0]["calls"]
    assert [r["turn_index"] for r in rows] == sorted(r["turn_index"] for r in rows)
    assert {r["dialogue_id"] for r in rows} == {first["dialogue_id"]}
    assert reads.dialogue_rows(other, synthetic_run, first["dialogue_id"]) == []
    assert list(reads.slim_rows(other, synthetic_run)) == []
