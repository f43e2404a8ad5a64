"""The job runners of the queue, called in-process: the batch runner's helpers and its outcome
for each failure, the evaluate runner's inputs, configuration and run log, and the figures
a running job shows (judge/service/queue/_batchjob.py, _evaluate.py, _inputs.py, _analysis.py
and _runners.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from judge import load_dialogues
from judge._config import load_config
from judge._errors import BudgetReached, DSTJudgeError, ModelError
from judge.model import call_key
from judge.service import build_settings, ensure_project
from judge.service import create_token as project_token
from judge.service.auth._auth import TokenBook
from judge.service.db._db import DatabaseUnavailable, job_batches
from judge.service.queue import _analysis as an
from judge.service.queue import _batchcollect as bc
from judge.service.queue import _batchjob as bj
from judge.service.queue import _evaluate as ev
from judge.service.queue import _inputs as ri
from judge.service.queue import _runners as rn
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer, get_json
from tests.service.conftest import CANARY_KEY, Api, insert_job, running_service, service_settings

THE_STORE = SimpleNamespace(root=Path("/srv/dst-judge/files"))
"""A stand-in for the file store: runners only hand it on, and name its data dir in messages
(``Inputs.clean``)."""


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- _batchjob: pure helpers ------------------------------------------------------------------


@pytest.mark.parametrize(("status", "transient"), [
    (None, True), (408, True), (409, True), (429, True), (500, True), (503, True),
    (400, False), (401, False), (404, False), (422, False), (499, False)])
def test_which_api_errors_are_transient(status, transient):
    """No connection, 408/409/429 and any 5xx are tried again; other statuses are final."""
    assert bj._transient(ModelError("x", status=status)) is transient


def test_batch_figures_count_only_rows_that_reached_the_provider():
    rows = [
        {"part": 1, "status": "completed", "requests": 5, "completed": 4, "failed": 1},
        {"part": 2, "status": "in_progress", "requests": 3, "completed": 1, "failed": 0},
        {"part": 2, "status": "expired", "requests": 2, "completed": 0, "failed": 2},
        {"part": 3, "status": bj.SUBMITTING, "requests": 7, "completed": 9, "failed": 9},
    ]
    assert bj._figures(rows, None) == {"files": 3, "submitted": 3, "ended": 2, "requests": 10,
                                       "requests_done": 8}
    assert bj._figures(rows, 6)["files"] == 6
    assert bj._figures(rows, 0)["files"] == 0
    assert bj._figures([], None) == {"files": 0, "submitted": 0, "ended": 0, "requests": 0,
                                     "requests_done": 0}


def test_the_planned_batches_are_found_in_either_manifest():
    plan = {"kind": bj.MANIFEST_KIND, "files": ["a"], "calls": 3}
    assert bj._planned(plan) is plan
    assert bj._planned({"kind": "run", "batch": plan}) is plan
    assert bj._planned({"kind": "run", "batch": {"kind": "other"}}) is None
    assert bj._planned({"kind": "run", "batch": None}) is None
    assert bj._planned({"kind": "run"}) is None
    assert bj._planned(None) is None
    assert bj._planned(["not", "a", "dict"]) is None  # type: ignore[arg-type]


def test_a_batch_is_tagged_with_its_job_and_file():
    assert bj._tags("job_1", "abc") == {"dst_judge_job": "job_1", "dst_judge_file": "abc"}


def test_batch_progress_shows_the_live_counters_and_the_batches():
    live = bj.BatchLive(total=4, done=1, batches={"files": 2})
    shown = live.as_progress()
    assert shown["batches"] == {"files": 2} and shown["total"] == 4 and shown["done"] == 1
    live.batches["files"] = 3
    assert shown["batches"] == {"files": 2}  # a copy, not the live dict


def test_a_batch_row_takes_the_providers_id_status_and_counts():
    placeholder = {"job_id": "j", "batch_id": "submitting:x", "part": 2, "sha256": "s",
                   "requests": 9, "status": bj.SUBMITTING, "completed": 0, "failed": 0,
                   "created_at": 1.0, "updated_at": 1.0}
    before = time.time()
    row = bj.BatchRunner._row_of({"id": "batch_7", "status": "validating",
                                  "request_counts": {"completed": 3, "failed": 2}}, placeholder)
    assert row["batch_id"] == "batch_7" and row["status"] == "validating"
    assert (row["completed"], row["failed"]) == (3, 2)
    assert row["part"] == 2 and row["requests"] == 9 and row["created_at"] == 1.0
    assert row["updated_at"] >= before
    bare = bj.BatchRunner._row_of({"id": "b", "status": "failed", "request_counts": None},
                                  placeholder)
    assert (bare["completed"], bare["failed"]) == (0, 0)
    nulls = bj.BatchRunner._row_of({"id": "b", "status": "failed",
                                    "request_counts": {"completed": None, "failed": None}},
                                   placeholder)
    assert (nulls["completed"], nulls["failed"]) == (0, 0)

    bj.BatchRunner._update(row, {"status": "completed",
                                 "request_counts": {"completed": 8, "failed": 1}})
    assert (row["status"], row["completed"], row["failed"]) == ("completed", 8, 1)
    bj.BatchRunner._update(row, {"status": "expired"})
    assert (row["status"], row["completed"], row["failed"]) == ("expired", 0, 0)
    bj.BatchRunner._update(row, {"status": "failed",
                                 "request_counts": {"completed": None, "failed": None}})
    assert (row["completed"], row["failed"]) == (0, 0)


# --- _batchjob: the runner's outcome for each failure -----------------------------------------


def _batch_runner(visit: Any) -> tuple[bj.BatchRunner, list[str]]:
    runner = object.__new__(bj.BatchRunner)
    runner.db, runner.store = "the-db", THE_STORE  # type: ignore[assignment]
    runner.settings = SimpleNamespace(batch_poll_seconds=30.0)  # type: ignore[assignment]
    released: list[str] = []

    async def release(job: Any) -> None:
        released.append(job.id)

    runner._visit = visit  # type: ignore[method-assign]
    runner._release = release  # type: ignore[method-assign]
    return runner, released


def _context(live: Any) -> Any:
    return SimpleNamespace(live=live, worker_id="w1", cancel_requested=lambda: False)


def _job(**values: Any) -> Any:
    return SimpleNamespace(**{"id": "job_1", "project_id": "p", "progress": None, **values})


def test_a_batch_runner_refuses_live_counters():
    runner, _ = _batch_runner(None)
    with pytest.raises(TypeError, match=r"^a batch job keeps BatchLive counters$"):
        _run(runner.run(_job(), _context(rn.Live())))


def test_a_transient_api_failure_parks_the_job_and_counts_the_retry():
    seen: list[Any] = []

    async def visit(job, worker_id, live, inputs, cancel_requested):
        seen.append((job.id, worker_id, dict(live.batches), inputs.project_id, inputs.db,
                     inputs.store))
        raise ModelError("upstream 503", status=503)

    runner, released = _batch_runner(visit)
    live = bj.BatchLive()
    before = time.time()
    parked = _run(runner.run(_job(progress={"batches": {"files": 2, "retries": 3}}),
                             _context(live)))
    assert isinstance(parked, rn.Park)
    assert before + 29 <= parked.wake_at <= time.time() + 31
    assert live.batches == {"files": 2, "retries": 4}
    assert seen == [("job_1", "w1", {"files": 2, "retries": 3}, "p", "the-db", THE_STORE)]
    assert released == []


def test_the_batch_api_failing_too_often_fails_the_job():
    async def visit(job, worker_id, live, inputs, cancel_requested):
        raise ModelError("upstream 500", status=500)

    runner, released = _batch_runner(visit)
    at_limit = _run(runner.run(_job(progress={"batches": {"retries": bj.MAX_RETRIES - 1}}),
                               _context(bj.BatchLive())))
    assert isinstance(at_limit, rn.Park)
    over = _run(runner.run(_job(progress={"batches": {"retries": bj.MAX_RETRIES}}),
                           _context(bj.BatchLive())))
    assert isinstance(over, rn.Outcome)
    assert (over.status, over.exit_code, over.error) == ("failed", 4, "upstream 500")
    assert released == ["job_1"]


@pytest.mark.parametrize(("status", "code"), [(401, 5), (403, 5), (404, 5), (400, 4),
                                              (422, 4)])
def test_a_final_api_error_fails_the_job_with_its_exit_code(status, code):
    async def visit(job, worker_id, live, inputs, cancel_requested):
        raise ModelError(f"refused {status}", status=status)

    runner, released = _batch_runner(visit)
    outcome = _run(runner.run(_job(), _context(bj.BatchLive())))
    assert (outcome.status, outcome.exit_code, outcome.error) == ("failed", code,
                                                                  f"refused {status}")
    assert released == ["job_1"]


def test_an_input_error_fails_a_batch_job_with_exit_2_and_others_propagate():
    async def bad_input(job, worker_id, live, inputs, cancel_requested):
        raise DSTJudgeError("schema is broken")

    runner, released = _batch_runner(bad_input)
    outcome = _run(runner.run(_job(), _context(bj.BatchLive())))
    assert (outcome.status, outcome.exit_code, outcome.error) == ("failed", 2,
                                                                  "schema is broken")
    assert released == ["job_1"]

    async def crash(job, worker_id, live, inputs, cancel_requested):
        raise RuntimeError("bug")

    runner, released = _batch_runner(crash)
    with pytest.raises(RuntimeError, match="bug"):
        _run(runner.run(_job(), _context(bj.BatchLive())))
    assert released == ["job_1"]

    async def no_db(job, worker_id, live, inputs, cancel_requested):
        raise DatabaseUnavailable("down")

    runner, released = _batch_runner(no_db)
    with pytest.raises(DatabaseUnavailable):
        _run(runner.run(_job(), _context(bj.BatchLive())))
    assert released == []  # its claims and batches stay


def test_a_visit_that_went_through_forgets_the_retries():
    done = rn.Outcome("succeeded", 0)

    async def visit(job, worker_id, live, inputs, cancel_requested):
        assert cancel_requested() is False
        return done

    runner, _ = _batch_runner(visit)
    live = bj.BatchLive()
    assert _run(runner.run(_job(progress={"batches": {"files": 1, "retries": 2}}),
                           _context(live))) is done
    assert live.batches == {"files": 1}


def test_a_batch_job_is_configured_like_a_live_job_of_its_endpoint(tmp_path):
    settings = build_settings({
        "data_dir": tmp_path, "default_endpoint": "main",
        "endpoints": {"main": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-x",
                               "organization": "org-1", "project": "proj-1",
                               "http_backend": "httpx", "batch_api": True}}})
    runner = object.__new__(bj.BatchRunner)
    runner.settings = settings
    job = SimpleNamespace(endpoint=None, options={
        "model": "gpt-4o", "temperature": 0.5, "batch_max_requests": 7, "limit": 2,
        "dialogue_ids": ["x"]})
    name, config = runner.config(job)
    assert name == "main"
    assert config.model == "gpt-4o" and config.temperature == 0.5
    assert config.batch_max_requests == 7
    assert config.base_url == "http://127.0.0.1:9/v1" and config.secret == "sk-x"
    assert config.organization == "org-1" and config.project == "proj-1"
    assert config.http_backend == "httpx" and config.use_cache is False


# --- _batchjob: the ledger's part ---------------------------------------------------------------


class _Ledger:
    def __init__(self, replies: dict[str, Any] | None = None, covered: set[str] = frozenset()):
        self._replies = replies or {}
        self._covered = set(covered)
        self.recorded: list[tuple[list[tuple[str, bytes]], str]] = []
        self.asked: list[Any] = []

    def replies(self, keys):
        keys = list(keys)
        self.asked.append(sorted(keys))
        return {k: self._replies[k] for k in keys if k in self._replies}

    def covered(self, keys):
        return {k for k in keys if k in self._covered}

    def record_replies(self, items, *, origin):
        self.recorded.append((sorted(items), origin))


def _plan(*calls: tuple[str, int, str, str]) -> Any:
    return SimpleNamespace(calls=[SimpleNamespace(dialogue_id=d, turn_index=t, dimension=m,
                                                  custom_id=c) for d, t, m, c in calls])


def test_what_the_batches_paid_for_goes_into_the_ledger_once_per_key():
    plan = _plan(("d1", 0, "state", "c1"), ("d1", 1, "state", "c2"), ("d2", 0, "state", "c3"))
    keys = {"c1": "k1", "c2": "k1", "c3": "k3"}
    bodies = {call_key("d1", 0, "state"): b"first", call_key("d1", 1, "state"): b"second"}
    ledger = _Ledger()
    bc.record_paid("batch:job_1", plan, keys, bodies, ledger)
    assert ledger.recorded == [([("k1", b"first")], "batch:job_1")]


def test_calls_left_to_other_jobs_wait_for_them_or_become_errors():
    config = load_config({"model": "m"})
    limits = bc.ReplyLimits.from_config(config)
    plan = _plan(("d1", 0, "state", "c1"), ("d1", 1, "state", "c2"), ("d2", 0, "state", "c3"))
    keys = {"c1": "k1", "c2": "k2", "c3": "k3"}

    waiting = _Ledger(covered={"k2"})
    assert bc.answers_from_ledger(config, plan, keys, {"c1", "c2"}, waiting,
                                  limits) == ({}, 1)
    assert waiting.asked == [["k1", "k2"]]

    gone = _Ledger(replies={"k1": SimpleNamespace(content=b"not a reply")})
    out, count = bc.answers_from_ledger(config, plan, keys, {"c1", "c2"}, gone, limits)
    assert count == 0 and set(out) == {call_key("d1", 0, "state"), call_key("d1", 1, "state")}
    missing = out[call_key("d1", 1, "state")]
    assert isinstance(missing, ModelError)
    assert str(missing) == ("left out of the batch for a reply the ledger was getting, which "
                            "never came; retry-errors sends it")
    assert isinstance(out[call_key("d1", 0, "state")], bc.ReplyError)

    nothing = _Ledger()
    assert bc.answers_from_ledger(config, plan, keys, set(), nothing, limits) == ({}, 0)


# --- _batchjob: the job's batch rows in the database --------------------------------------------


def _batch_row(job_id: str, batch_id: str, part: int, status: str, **values: Any
               ) -> dict[str, Any]:
    return {"job_id": job_id, "batch_id": batch_id, "part": part, "sha256": f"sha{part}",
            "requests": 4, "status": status, "completed": 0, "failed": 0,
            "created_at": float(part), "updated_at": float(part), **values}


def test_batch_rows_are_replaced_updated_and_listed_in_file_order(db):
    project = ensure_project(db, "lab")
    insert_job(db, "job_a", project, "tok", "running", lease_owner="w1")
    insert_job(db, "job_b", project, "tok", "waiting", lease_owner="w1")
    runner = object.__new__(bj.BatchRunner)
    runner.db = db
    runner._replace("job_a", None, _batch_row("job_a", "b2", 2, "in_progress"))
    runner._replace("job_a", None, _batch_row("job_a", "submitting:x", 1, bj.SUBMITTING))
    runner._replace("job_b", None, _batch_row("job_b", "b9", 1, "completed"))
    assert [r["batch_id"] for r in bj.batch_rows(db, "job_a")] == ["submitting:x", "b2"]

    runner._replace("job_a", "submitting:x", _batch_row("job_a", "b1", 1, "validating"))
    runner._replace("job_a", "nope", None)
    rows = bj.batch_rows(db, "job_a")
    assert [(r["batch_id"], r["part"], r["status"]) for r in rows] == [
        ("b1", 1, "validating"), ("b2", 2, "in_progress")]

    rows[0].update(status="completed", completed=3, failed=1, updated_at=50.0)
    runner._store_status(rows)
    again = bj.batch_rows(db, "job_a")
    assert (again[0]["status"], again[0]["completed"], again[0]["failed"],
            again[0]["updated_at"]) == ("completed", 3, 1, 50.0)
    assert again[1]["status"] == "in_progress"
    assert bj.batch_rows(db, "job_b")[0]["status"] == "completed"  # another job's row stays

    runner._replace("job_a", "b2", None)
    assert [r["batch_id"] for r in bj.batch_rows(db, "job_a")] == ["b1"]
    assert bj.batch_rows(db, "job_b")[0]["batch_id"] == "b9"

    assert runner._holds_lease("job_a", "w1") is True
    assert runner._holds_lease("job_a", "w2") is False
    assert runner._holds_lease("job_b", "w1") is False  # not running
    assert runner._holds_lease("job_missing", "w1") is False


def test_batch_rows_of_one_file_are_ordered_by_creation(db):
    project = ensure_project(db, "lab")
    insert_job(db, "job_a", project, "tok", "running")
    runner = object.__new__(bj.BatchRunner)
    runner.db = db
    runner._replace("job_a", None, _batch_row("job_a", "a_late", 1, "failed", created_at=9.0))
    runner._replace("job_a", None, _batch_row("job_a", "z_early", 1, "failed", created_at=2.0))
    assert [r["batch_id"] for r in bj.batch_rows(db, "job_a")] == ["z_early", "a_late"]
    with db.read() as conn:
        assert conn.execute(job_batches.select()).first() is not None


# --- _runners and _inputs: small pieces --------------------------------------------------


def test_the_eta_follows_the_pace_since_the_job_started():
    live = rn.Live(total=10, done=6, done_at_start=2, started=time.monotonic() - 400)
    shown = live.as_progress()
    assert 399 < shown["eta_seconds"] < 402
    assert {k: shown[k] for k in ("total", "done", "cache_hits", "errors")} == {
        "total": 10, "done": 6, "cache_hits": 0, "errors": 0}
    assert rn.Live(total=10, done=2, done_at_start=2).as_progress()["eta_seconds"] is None
    assert rn.Live(total=None, done=6, done_at_start=2).as_progress()["eta_seconds"] is None
    assert rn.Live(total=10, done=6).as_progress()["eta_seconds"] is None
    counted = rn.Live(total=3, done=1, cache_hits=2, errors=1).as_progress()
    assert (counted["cache_hits"], counted["errors"]) == (2, 1)


def test_an_eta_is_rounded_to_a_tenth_of_a_second():
    live = rn.Live(total=7, done=4, done_at_start=1, started=time.monotonic() - 2.52)
    assert live.as_progress()["eta_seconds"] == 2.5


@pytest.mark.parametrize(("name", "stem"), [
    ("sys.jsonl.gz", "sys"), ("sys.json", "sys"), ("sys.jsonl", "sys"), ("sys.txt", "sys.txt"),
    ("a.json.gz", "a")])
def test_a_file_name_stem_drops_the_data_suffixes(name, stem):
    assert ri.stem(name) == stem


def test_a_subset_keeps_the_named_dialogues_then_the_first_ones():
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl")
    ids = [d.dialogue_id for d in dialogues.dialogues]
    assert len(ids) >= 3
    assert ri.subset(dialogues, {}) is dialogues
    assert [d.dialogue_id for d in ri.subset(dialogues, {"limit": 2}).dialogues] == ids[:2]
    assert ri.subset(dialogues, {"limit": 0}).dialogues == []
    picked = ri.subset(dialogues, {"dialogue_ids": [ids[2], ids[0]]})
    assert [d.dialogue_id for d in picked.dialogues] == [ids[2], ids[0]]
    both = ri.subset(dialogues, {"dialogue_ids": [ids[2], ids[0]], "limit": 1})
    assert [d.dialogue_id for d in both.dialogues] == [ids[2]]
    with pytest.raises(DSTJudgeError, match=r"options\.dialogue_ids"):
        ri.subset(dialogues, {"dialogue_ids": ["no-such-dialogue"]})


def _inputs(names: dict[str, str]) -> ri.Inputs:
    inputs = ri.Inputs(None, THE_STORE, "p")  # type: ignore[arg-type]
    inputs.names.update(names)
    return inputs


def test_a_summary_keeps_no_server_path_nor_endpoint_detail():
    inputs = _inputs({"/srv/data/files/ab12": "preds.jsonl"})
    summary = {"source": "/srv/data/files/ab12", "note": "Café ☕",
               "options": {"model": "m", "base_url": "http://x", "cache_dir": "/c",
                           "prices": "/p.json", "api_key_set": True, "organization": "o",
                           "project": "pr", "http_backend": "httpx", "endpoint": "old"}}
    clean = ri.scrub_summary(summary, "fake", inputs)
    assert clean == {"source": "preds.jsonl", "note": "Café ☕",
                     "options": {"model": "m", "endpoint": "fake"}}
    kept = ri.scrub_summary(summary, None, inputs)
    assert kept["options"] == {"model": "m", "endpoint": "old"}
    assert ri.scrub_summary({"options": None}, "fake", inputs) == {"options": None}
    assert summary["options"]["base_url"] == "http://x"  # the original is left alone


def test_analysis_results_are_json_with_upload_names():
    inputs = _inputs({"/srv/f/1": "labels.jsonl", "/srv/f/2": "ölabels.jsonl"})
    data = {"path": Path("/srv/f/1"), "other": "/srv/f/2 and é", "n": 1}
    assert ri.as_json(data, inputs) == {"path": "labels.jsonl", "other": "ölabels.jsonl and é",
                                      "n": 1}
    assert inputs.clean("x /srv/f/1 y /srv/f/1") == "x labels.jsonl y labels.jsonl"


# --- _evaluate: EvaluateRunner -------------------------------------------------------------------


class _FakeInputs:
    """Inputs over the example files: file id → (path, row)."""

    def __init__(self, rows: dict[str, tuple[Path, dict[str, Any]]]) -> None:
        self.rows = rows
        self.prefetched: list[Any] = []

    def prefetch(self, ids):
        self.prefetched.append(list(ids))

    def path(self, file_id):
        return self.rows[file_id]


def _evaluator(tmp_path: Path | None = None) -> ev.EvaluateRunner:
    runner = object.__new__(ev.EvaluateRunner)
    runner.parsed = ri.ParsedFiles()
    runner._configs = {}
    runner._configs_lock = threading.Lock()
    if tmp_path is not None:
        runner.settings = SimpleNamespace(data_dir=tmp_path)  # type: ignore[assignment]
    return runner


def _example_inputs(pred_name: str, info: dict[str, Any] | None) -> _FakeInputs:
    return _FakeInputs({
        "s": (EXAMPLES / "schema.json", {"name": "my-schema.json"}),
        "d": (EXAMPLES / "dialogues.jsonl", {"name": "dialogues.jsonl"}),
        "p": (EXAMPLES / "predictions.jsonl", {"name": pred_name, "info": info}),
    })


def test_the_system_is_named_by_its_info_else_by_its_file_name():
    runner = _evaluator()
    files = {"schema": "s", "dialogues": "d", "predictions": "p"}
    named = _example_inputs("preds.jsonl.gz", {"system_name": "TripPy"})
    schema, dialogues, predictions, rules, sources = runner.read_inputs(files, {}, named)
    assert predictions.name == "TripPy"
    assert named.prefetched == [["s", "d", "p", None]]
    assert sources == {"schema": "my-schema.json", "rules": None}
    assert rules is not None and schema is not None
    for info in (None, {}, {"system_name": ""}):
        plain = runner.read_inputs(files, {}, _example_inputs("my-sys.jsonl.gz", info))
        assert plain[2].name == "my-sys"
    limited = runner.read_inputs(files, {"limit": 1}, _example_inputs("a.jsonl", None))
    assert len(limited[1].dialogues) == 1 and len(dialogues.dialogues) > 1


def test_parsed_files_are_shared_by_path():
    parsed = ri.ParsedFiles(size=2)
    assert parsed.schema(EXAMPLES / "schema.json") is parsed.schema(EXAMPLES / "schema.json")
    assert parsed.dialogues(EXAMPLES / "dialogues.jsonl") is parsed.dialogues(
        EXAMPLES / "dialogues.jsonl")
    rules = parsed.default_rules(EXAMPLES / "schema.json")
    assert rules is parsed.default_rules(EXAMPLES / "schema.json")


def test_jobs_with_the_same_options_share_one_configuration():
    runner = _evaluator()
    first = runner._config({"model": "m", "temperature": 0.0})
    assert runner._config({"temperature": 0.0, "model": "m"}) is first
    other = runner._config({"model": "n"})
    assert other is not first and other.model == "n" and first.model == "m"
    for i in range(64):
        runner._config({"model": f"x{i}"})
    assert len(runner._configs) == 64
    assert runner._config({"model": "m", "temperature": 0.0}) is not first  # evicted first


def _line(custom_id: str, **values: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "dimension": "state", "template_hash": "t",
            "prompt_hash": "p", **values}


def test_a_job_runs_without_a_run_directory(tmp_path):
    """The run log of a job is the database's: starting its run writes no folder (the
    folder round trip is gone), and the calls the database holds are what it resumes from."""
    runner = _evaluator(tmp_path)
    assert not hasattr(runner, "prepare_run_dir")
    assert runner.run_dir("job_1") == tmp_path / "runs" / "job_1"  # a batch job's files only


def test_the_budget_is_the_jobs_without_a_token():
    runner = _evaluator()
    assert runner.budget(SimpleNamespace(token_id=None, budget_usd=2.5)) == 2.5
    assert runner.budget(SimpleNamespace(token_id=None, budget_usd=None)) is None


def test_the_ledger_is_shared_across_projects_only_when_the_operator_says_so():
    runner = _evaluator()
    runner.settings = SimpleNamespace(share_cache_across_projects=False)  # type: ignore
    assert runner.ledger_scope("proj_1") == "proj_1"
    runner.settings = SimpleNamespace(share_cache_across_projects=True)  # type: ignore
    assert runner.ledger_scope("proj_1") == ev.SHARED_SCOPE


class _Jobs:
    def __init__(self, *rows: Any) -> None:
        self.rows = {r.id: r for r in rows}
        self.asked: list[tuple[str, str]] = []

    def row(self, project_id, job_id):
        self.asked.append((project_id, job_id))
        return self.rows[job_id]


def _evaluate_runner(jobs: Any, failure: Exception | None = None
                     ) -> tuple[ev.EvaluateRunner, list[Any]]:
    runner = _evaluator()
    runner.db, runner.store = "the-db", THE_STORE  # type: ignore[assignment]
    runner.jobs = jobs
    seen: list[Any] = []

    async def fake_run(job, source, seed_job, options, inputs, context):
        assert (inputs.db, inputs.store) == ("the-db", THE_STORE)
        seen.append((job.id, source.id, seed_job.id if seed_job else None, options,
                     inputs.project_id))
        if failure is not None:
            raise failure
        return rn.Outcome("succeeded", 0)

    runner._run = fake_run  # type: ignore[method-assign]
    return runner, seen


def test_a_retry_of_a_retry_is_judged_from_the_first_run():
    """retry-errors names the run it continues; a chain of retries goes back to the evaluate
    job for the inputs and options, and the retry it names seeds the run log."""
    first = SimpleNamespace(id="job_eval", kind="evaluate", inputs={"schema": "s"},
                            options={"model": "m", "concurrency": 2})
    retry1 = SimpleNamespace(id="job_r1", kind="retry-errors", inputs={"run": "job_eval"},
                             options={"concurrency": 3})
    retry2 = SimpleNamespace(id="job_r2", kind="retry-errors", project_id="p",
                             inputs={"run": "job_r1"}, options={"timeout": 9})
    jobs = _Jobs(first, retry1)
    runner, seen = _evaluate_runner(jobs)
    outcome = _run(runner.run(retry2, None))
    assert outcome.status == "succeeded"
    assert seen == [("job_r2", "job_eval", "job_r1", {"model": "m", "concurrency": 2,
                                                      "timeout": 9}, "p")]
    assert jobs.asked == [("p", "job_r1"), ("p", "job_eval")]

    evaluate = SimpleNamespace(id="job_e2", kind="evaluate", project_id="p", inputs={},
                               options={"model": "x"})
    runner, seen = _evaluate_runner(_Jobs())
    _run(runner.run(evaluate, None))
    assert seen == [("job_e2", "job_e2", None, {"model": "x"}, "p")]


@pytest.mark.parametrize(("failure", "status", "code", "message"), [
    (BudgetReached("budget of 1 USD reached"), "stopped", 3,
     "budget of 1 USD reached; raise the budget and resume the job"),
    (ModelError("bad key", fatal=True, status=401), "failed", 5, "bad key"),
    (ModelError("server down", status=503), "failed", 4, "server down"),
    (DSTJudgeError("broken file"), "failed", 2, "broken file"),
])
def test_an_evaluate_jobs_failure_becomes_its_outcome(failure, status, code, message):
    job = SimpleNamespace(id="job_1", kind="evaluate", project_id="p", inputs={},
                          options={})
    runner, _ = _evaluate_runner(_Jobs(), failure)
    outcome = _run(runner.run(job, None))
    assert (outcome.status, outcome.exit_code) == (status, code)
    assert outcome.error == message


def test_an_evaluate_job_waits_out_a_database_outage():
    job = SimpleNamespace(id="job_1", kind="evaluate", project_id="p", inputs={}, options={})
    runner, _ = _evaluate_runner(_Jobs(), DatabaseUnavailable("down"))
    with pytest.raises(DatabaseUnavailable):
        _run(runner.run(job, None))


# --- a batch job against the fake server's Batch API -------------------------------------------


def _batch_job(tmp_path: Path, config: FaultConfig, options: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """One evaluate job in batch mode against the fake Batch API, run to its end: the job, its
    results and the batches the provider created."""
    with FaultServer(config) as model:
        settings = service_settings(
            tmp_path / "data", model.url, batch_poll_seconds=0.1,
            endpoints={"fake": {"base_url": model.url, "api_key": CANARY_KEY,
                                "batch_api": True}})
        with running_service(settings) as (service, app):
            api = Api(app, project_token(service.db, "lab", "read,submit")[0])
            try:
                queued = api.post("/v1/jobs", json={
                    "kind": "evaluate", "inputs": api.upload_examples(), "mode": "batch",
                    "options": {"model": "fault-model", **options}})
                assert queued.status_code == 201, queued.text
                job = api.wait(queued.json()["id"], timeout=60)
                results = api.get(f"/v1/jobs/{job['id']}/results").json()
            finally:
                api.close()
        created = get_json(model.port, "/v1/batches")["data"]
    return job, results, created


def test_a_collected_batch_job_lists_its_batches_and_what_each_carried(tmp_path):
    """The results of a batch job name each batch with its status and request count, as the
    provider has them; the progress adds up the same requests."""
    job, summary, created = _batch_job(tmp_path, FaultConfig(batch_seconds=0.2),
                                       {"batch_max_requests": 6})
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    listed = summary["batches"]
    assert len(listed) == len(created) >= 2
    assert all(set(b) == {"id", "status", "requests"} for b in listed)
    assert {b["id"] for b in listed} == {b["id"] for b in created}
    assert all(b["status"] == "completed" and 0 < b["requests"] <= 6 for b in listed)
    assert sum(b["requests"] for b in listed) == job["progress"]["batches"]["requests"]
    assert summary["options"]["endpoint"] == "fake" and "base_url" not in summary["options"]


def test_a_batch_job_that_judged_nothing_fails_with_the_models_reasons(tmp_path):
    """Every batch line a refusal: the job fails with exit 4, and its message is one reason
    (how many calls failed, and the first failure's words, as a live run's), not a bare prefix
    nor one message per call."""
    job, results, _ = _batch_job(tmp_path, FaultConfig(batch_seconds=0.1,
                                                       rates={"refusal": 1.0}),
                                 {"max_retries": 0})
    examples = results["errors"]["examples"]
    assert job["status"] == "failed" and job["exit_code"] == 4, job
    assert len(examples) >= 2 and all("refused" in e for e in examples), examples
    calls = results["calls"]["planned"]
    first = examples[0].split(": ", 1)[1].split("; ")[0].split(": ", 1)[1]
    assert job["error"] == (f"nothing could be judged: {calls} of {calls} calls failed; "
                            f"the first: {first}")


def test_a_tokens_spending_cap_bounds_the_jobs_budget(db):
    """What the token may still spend caps the job's budget; this job's own spending so far
    does not count against it, and a spent cap leaves a budget just above zero."""
    _, capped = project_token(db, "lab", "submit", name="capped", spend_cap_usd=10.0)
    _, free = project_token(db, "lab", "submit", name="free")
    runner = _evaluator()
    runner.db = db
    spent = {capped["id"]: 3.0, free["id"]: 50.0}
    runner.jobs = SimpleNamespace(spent_by_token=spent.__getitem__,  # type: ignore
                                  tokens=TokenBook(db))  # the cap: read by the token store

    def job(token: dict[str, Any], budget: float | None, cost: float | None = 1.0) -> Any:
        return SimpleNamespace(token_id=token["id"], budget_usd=budget, cost_usd=cost)

    assert runner.budget(job(free, None)) is None
    assert runner.budget(job(free, 4.0)) == 4.0
    assert runner.budget(job(capped, None)) == pytest.approx(8.0)
    assert runner.budget(job(capped, None, None)) == pytest.approx(7.0)
    assert runner.budget(job(capped, 5.0)) == 5.0
    assert runner.budget(job(capped, 20.0)) == pytest.approx(8.0)
    spent[capped["id"]] = 40.0
    assert runner.budget(job(capped, None)) == pytest.approx(1e-9)
    assert runner.budget(job(capped, 2.0)) == pytest.approx(1e-9)


def test_input_files_are_read_from_the_jobs_project_only(db, tmp_path):
    """A job sees the files of its own project by id (several in one query); one of another
    project, or deleted, is an input error naming the id; messages name the upload."""
    from judge.service.db._db import blobs, files

    lab, other = ensure_project(db, "lab"), ensure_project(db, "other")
    with db.write() as conn:
        for sha in ("a" * 64, "b" * 64):
            conn.execute(blobs.insert().values(sha256=sha, size=1, data=b"x", created_at=1.0))
        for file_id, project, sha, name in (("f1", lab, "a" * 64, "schema.json"),
                                            ("f2", lab, "b" * 64, "preds.jsonl"),
                                            ("f3", other, "a" * 64, "theirs.json")):
            conn.execute(files.insert().values(id=file_id, project_id=project, kind="schema",
                                               name=name, sha256=sha, size=1, info={},
                                               created_at=1.0))
    store = SimpleNamespace(local_path=lambda sha: tmp_path / sha[:2] / sha, root=tmp_path)
    inputs = ri.Inputs(db, store, lab)  # type: ignore[arg-type]
    inputs.prefetch(["f1", None, "f3"])
    assert set(inputs._rows) == {"f1"}
    path, row = inputs.path("f1")
    assert path == tmp_path / "aa" / ("a" * 64) and row["name"] == "schema.json"
    second, row2 = inputs.path("f2")  # not prefetched: looked up alone
    assert row2["name"] == "preds.jsonl" and row2["project_id"] == lab
    assert inputs.names == {str(path): "schema.json", str(second): "preds.jsonl"}
    assert inputs.clean(f"cannot read {second}") == "cannot read preds.jsonl"
    with pytest.raises(DSTJudgeError, match="input file f3 was deleted"):
        inputs.path("f3")
    with pytest.raises(DSTJudgeError, match="input file f9 was deleted"):
        inputs.path("f9")


def test_a_worker_keeps_one_connection_pool_per_endpoint_timeout_and_reply_cap():
    """aiohttp jobs of one endpoint, timeout and reply cap share a pool; httpx jobs get none;
    closing the runner empties the table."""
    async def scenario() -> None:
        runner = _evaluator()
        runner._transports = {}
        plain = load_config({"model": "m", "http_backend": "httpx"})
        assert runner.transport(plain) is None
        fast = load_config({"model": "m", "http_backend": "aiohttp", "timeout": 5})
        slow = load_config({"model": "m", "http_backend": "aiohttp", "timeout": 50})
        other = load_config({"model": "m", "http_backend": "aiohttp", "timeout": 5,
                             "base_url": "http://127.0.0.1:9/v1"})
        pool = runner.transport(fast)
        assert isinstance(pool, ev.AiohttpTransport)
        assert runner.transport(load_config({"model": "n", "http_backend": "aiohttp",
                                             "timeout": 5})) is pool
        assert runner.transport(slow) is not pool
        assert runner.transport(other) is not pool
        assert len(runner._transports) == 3
        await runner.aclose()
        assert runner._transports == {}
        assert runner.transport(fast) is not pool
        await runner.aclose()

    _run(scenario())


# --- _kinds and _analysis: one runner per kind -----------------------------------------------


def test_an_analysis_job_without_judgments_fails_naming_the_run(db):
    """A run with no judgments is an input error naming the job (read through the job's run
    log in the database), and ends the job as failed (exit 2)."""
    project = ensure_project(db, "lab")
    insert_job(db, "job_src", project, "tok", "failed", summary={"turns": 1})
    runner = object.__new__(an.AuditRunner)
    runner.db, runner.store = db, THE_STORE  # type: ignore[assignment]
    audit = SimpleNamespace(id="job_2", kind="audit", project_id=project,
                            inputs={"run": "job_src"}, options={})
    outcome = _run(runner.run(audit, None))
    assert (outcome.status, outcome.exit_code) == ("failed", 2)
    assert outcome.error == "<input>: job job_src holds no judgments"
    other = ensure_project(db, "other")
    elsewhere = SimpleNamespace(**{**vars(audit), "project_id": other})
    outcome = _run(runner.run(elsewhere, None))
    assert (outcome.status, outcome.error) == ("failed", "no job 'job_src' in this project")


def test_the_analyses_are_dispatched_by_the_table_of_kinds_alone():
    """One runner per analysis kind (the table picks it): no runner asks a job its kind."""
    import inspect

    for module in (an, rn):
        assert "job.kind ==" not in inspect.getsource(module)


# --- _batchjob: polling, cancelling and settling against a stubbed Batch API --------------------


def _db_runner(db: Any) -> tuple[bj.BatchRunner, list[str]]:
    runner = object.__new__(bj.BatchRunner)
    runner.db = db
    released: list[str] = []

    async def release(job: Any) -> None:
        released.append(job.id)

    runner._release = release  # type: ignore[method-assign]
    return runner, released


def _three_batches(db: Any, runner: bj.BatchRunner) -> None:
    project = ensure_project(db, "lab")
    insert_job(db, "job_a", project, "tok", "running")
    runner._replace("job_a", None, _batch_row("job_a", "b_done", 1, "completed", completed=4))
    runner._replace("job_a", None, _batch_row("job_a", "b_run", 2, "in_progress"))
    runner._replace("job_a", None, _batch_row("job_a", "submitting:c", 3, bj.SUBMITTING))


def test_polling_asks_only_about_unfinished_batches_and_stores_the_answers(db, monkeypatch):
    runner, _ = _db_runner(db)
    _three_batches(db, runner)
    asked: list[str] = []

    async def status(config, batch_id):
        assert config == "the-config"
        asked.append(batch_id)
        return {"status": "finalizing", "request_counts": {"completed": 3, "failed": 1}}

    monkeypatch.setattr(bj, "status", status)
    live = bj.BatchLive(batches={"files": 5})
    rows = _run(runner._poll("the-config", bj.batch_rows(db, "job_a"), live))
    assert asked == ["b_run"]
    stored = {r["batch_id"]: r for r in bj.batch_rows(db, "job_a")}
    assert (stored["b_run"]["status"], stored["b_run"]["completed"],
            stored["b_run"]["failed"]) == ("finalizing", 3, 1)
    assert stored["b_done"]["status"] == "completed"
    assert [r["status"] for r in rows] == ["completed", "finalizing", bj.SUBMITTING]
    assert live.batches == {"files": 5, "submitted": 2, "ended": 1, "requests": 8,
                            "requests_done": 8}


def test_cancelling_cancels_the_running_batches_and_reports_a_refusal(db, monkeypatch):
    runner, released = _db_runner(db)
    _three_batches(db, runner)
    runner._replace("job_a", None, _batch_row("job_a", "b_stuck", 4, "validating"))
    asked: list[str] = []

    async def cancel(config, batch_id):
        assert config == "the-config"
        asked.append(batch_id)
        if batch_id == "b_stuck":
            raise ModelError("batch b_stuck cannot be cancelled", status=400)
        return {"status": "cancelling", "request_counts": {"completed": 1, "failed": 0}}

    monkeypatch.setattr(bj, "cancel", cancel)
    live = bj.BatchLive(batches={"files": 7})
    outcome = _run(runner._cancel("the-config", _job(id="job_a"), bj.batch_rows(db, "job_a"),
                                  live))
    assert asked == ["b_run", "b_stuck"]
    assert (outcome.status, outcome.exit_code) == ("cancelled", None)
    assert outcome.error == ("cancelled on request (the API refused: batch b_stuck cannot be "
                             "cancelled)")
    assert released == ["job_a"]
    stored = {r["batch_id"]: r["status"] for r in bj.batch_rows(db, "job_a")}
    assert stored == {"b_done": "completed", "b_run": "cancelling",
                      "submitting:c": bj.SUBMITTING, "b_stuck": "validating"}
    assert live.batches["submitted"] == 3 and live.batches["files"] == 7

    async def polite(config, batch_id):
        return {"status": "cancelled"}

    monkeypatch.setattr(bj, "cancel", polite)
    again = _run(runner._cancel(None, _job(id="job_a"), bj.batch_rows(db, "job_a"), live))
    assert again.error == "cancelled on request"


def test_a_submission_left_unfinished_is_settled_by_the_providers_metadata(db, monkeypatch):
    runner, _ = _db_runner(db)
    _three_batches(db, runner)
    runner._replace("job_a", None, _batch_row("job_a", "submitting:d", 4, bj.SUBMITTING))
    asked: list[tuple[dict[str, str], float]] = []

    async def find_batch(config, tags, *, since):
        assert config == "the-config"
        asked.append((tags, since))
        if tags["dst_judge_file"] == "sha3":
            return {"id": "b_found", "status": "in_progress",
                    "request_counts": {"completed": 2, "failed": 0}}
        return None

    monkeypatch.setattr(bj, "find_batch", find_batch)
    rows = _run(runner._settle("the-config", "job_a", bj.batch_rows(db, "job_a")))
    assert asked == [({"dst_judge_job": "job_a", "dst_judge_file": "sha3"}, 3.0),
                     ({"dst_judge_job": "job_a", "dst_judge_file": "sha4"}, 4.0)]
    assert [(r["batch_id"], r["part"], r["status"], r["completed"]) for r in rows] == [
        ("b_done", 1, "completed", 4), ("b_run", 2, "in_progress", 0),
        ("b_found", 3, "in_progress", 2)]
