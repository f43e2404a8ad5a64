"""``dst-judge jobs`` prints every job id whole, even on an 80-column terminal (the id is what
``results`` needs), and its dates and figures too."""

from __future__ import annotations

from rich.console import Console

from judge.cli._remote import jobs_table
from judge.client import Job


def _job(job_id: str, kind: str = "retry-errors") -> Job:
    return Job.model_validate({
        "id": job_id, "kind": kind, "mode": "live", "status": "succeeded", "endpoint": None,
        "inputs": {}, "options": {}, "budget_usd": None,
        "created_at": "2026-11-27T05:31:07.123456Z", "started_at": None, "finished_at": None,
        "updated_at": None, "attempts": 1, "cancel_requested": False, "exit_code": 0,
        "exit_meaning": None, "error": None, "imported": False, "headline": None,
        "progress": {"done": 1234, "total": 12345, "cost_usd": 123.4567, "cache_hits": 0,
                     "errors": 0, "tokens": 0, "eta_seconds": None}})


def test_job_ids_dates_and_figures_are_whole_at_80_60_and_40_columns():
    ids = [f"job_{n:016x}" for n in (0x3f9a5c7e1b2d4f60, 0x1, 0xFFFFFFFFFFFFFFFF)]
    for width in (80, 60, 40):
        console = Console(width=width, record=True, color_system=None)
        console.print(jobs_table([_job(i) for i in ids]))
        text = console.export_text()
        for job_id in ids:
            assert job_id in text, (width, text)
        for value in ("retry-errors", "succeeded", "1234/12345", "$123.4567"):
            assert value in text.split(), (width, value, text)
        assert any("2026-11-27 05:31:07" in line for line in text.splitlines()), (width, text)
        assert max(len(line) for line in text.splitlines()) <= width
