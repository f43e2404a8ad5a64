"""The contract every run store keeps (:class:`judge.pipeline.RunStore`: a run directory, the
service's database): subclass :class:`RunStoreContract` and provide a ``place`` fixture, a
:class:`Place` whose stores all share one storage (as a process resuming a run after a kill
opens the same folder, or a worker taking a job over reads the same rows).

    class TestFolder(RunStoreContract):
        @pytest.fixture
        def place(self, tmp_path):
            return Place(open=lambda: RunDirectory(tmp_path / "run"))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import respx

from judge import load_config
from judge._digest import canonical_json
from judge._errors import InputError, OptionError, RunConflict
from judge.errors import BudgetReached
from judge.model import Cassette, read_output
from judge.pipeline import CallResult, RunStore, collect, evaluate, plan_evaluation

from ..conftest import CASSETTES, mount_cassette


@dataclass
class Place:
    """Where a contract test's run is kept: ``open`` gives a new store over it; ``commit``
    makes the results a store wrote readable (the service's finish step), if it must."""

    open: Callable[[], Any]
    commit: Callable[[Any], None] = lambda store: None


MANIFEST = {"format": 1, "kind": "evaluate", "inputs": {"schema": "s1", "dialogues": "d1"},
            "config": {"model": "m", "temperature": 0.0}, "templates": {"state": "t1"},
            "sources": {"dialogues": "dialogues.jsonl", "predictions": "predictions.jsonl",
                        "dialogue_ids": ["d1"]}, "options": {"model": "m"}}


def _call(custom_id: str, **values: Any) -> CallResult:
    return CallResult(dimension="state", custom_id=custom_id, template_hash="t1",
                      prompt_hash=f"p-{custom_id}", **values)


def _record(result: CallResult) -> dict[str, Any]:
    return json.loads(json.dumps(vars(result)))


def batch_records(config: Any, example_data: Any, folder: Any) -> dict[Any, Any]:
    """What a finished batch of the example run answers (the recorded live replies, one
    output line per planned call), as ``read_output`` reads it."""
    by_body = {canonical_json(i["request"]["body"]): i["response"]
               for i in Cassette.load(CASSETTES / "example-two-dim.json")}
    plan = plan_evaluation(config, *example_data)
    output = folder / "batch-output.jsonl"
    output.write_text("".join(json.dumps({
        "id": f"batch_req_{n}", "custom_id": call.custom_id, "error": None,
        "response": {"status_code": by_body[canonical_json(call.body)]["status_code"],
                     "body": by_body[canonical_json(call.body)]["body"]}}) + "\n"
        for n, call in enumerate(plan.calls)))
    return read_output(output)


class RunStoreContract:
    """Behaviour shared by every :class:`judge.pipeline.RunStore`."""

    @pytest.fixture
    def place(self) -> Place:  # pragma: no cover - provided by each implementation's class
        raise NotImplementedError

    def _started(self, place: Place, manifest: dict[str, Any] = MANIFEST, **options: Any
                 ) -> tuple[Any, list[dict[str, Any]]]:
        store = place.open()
        return store, store.start(manifest, resume=options.pop("resume", False), **options)

    def test_it_is_a_run_store(self, place):
        store = place.open()
        assert isinstance(store, RunStore)
        assert store.name

    def test_a_new_run_starts_empty_under_its_manifest(self, place):
        fresh = place.open()
        assert fresh.read_manifest() is None and fresh.read_log() == []
        store, logged = self._started(place)
        assert logged == [] and isinstance(store.run_id, str) and store.run_id
        assert store.read_manifest() == {**MANIFEST, "run_id": store.run_id}
        store.close()
        assert place.open().read_manifest() == {**MANIFEST, "run_id": store.run_id}

    def test_appended_calls_are_read_back_and_survive_the_store(self, place):
        store, _ = self._started(place)
        calls = [_call("c1", explanation="naïve ☕", results={"s": {"v": 1}}),
                 _call("c2", error="HTTP 500", attempts=[{"status": 500}])]
        for call in calls:
            store.append(call)
        assert store.read_log() == [_record(c) for c in calls]
        store.close()
        again = place.open()  # another process, after a kill
        assert sorted(again.read_log(), key=lambda e: e["custom_id"]) == [
            _record(c) for c in calls]
        assert again.read_manifest() == {**MANIFEST, "run_id": store.run_id}

    def test_the_same_run_resumes_from_its_log_with_its_run_id(self, place):
        store, _ = self._started(place)
        store.append(_call("c1", results={}))
        store.close()
        resumed, logged = self._started(place, resume=True)
        assert [e["custom_id"] for e in logged] == ["c1"]
        assert resumed.run_id == store.run_id
        assert [CallResult.from_log(e) for e in logged] == [_call("c1", results={})]
        resumed.close()

    def test_nothing_to_resume_is_refused(self, place):
        with pytest.raises(OptionError, match="nothing to resume"):
            self._started(place, resume=True)

    def test_another_run_is_refused_naming_what_differs_and_changes_nothing(self, place):
        store, _ = self._started(place)
        store.append(_call("c1"))
        store.close()
        other = {**MANIFEST, "config": {**MANIFEST["config"], "model": "other"}}
        with pytest.raises(RunConflict, match=r"holds another run .*config\.model"):
            self._started(place, other)
        kept = place.open()
        assert kept.read_manifest() == {**MANIFEST, "run_id": store.run_id}
        assert [e["custom_id"] for e in kept.read_log()] == ["c1"]

    def test_force_starts_another_run_afresh(self, place):
        store, _ = self._started(place)
        store.append(_call("c1"))
        store.close()
        other = {**MANIFEST, "templates": {"state": "t2"}}
        forced, logged = self._started(place, other, force=True)
        assert logged == [] and forced.run_id != store.run_id
        forced.close()
        assert place.open().read_log() == []
        assert place.open().read_manifest()["templates"] == {"state": "t2"}

    def test_retry_failed_drops_the_calls_that_ended_in_an_error(self, place):
        store, _ = self._started(place)
        store.append(_call("ok", results={}))
        store.append(_call("bad", error="timeout"))
        store.close()
        retry, logged = self._started(place, resume=True, retry_failed=True)
        assert [e["custom_id"] for e in logged] == ["ok"] and retry.dropped == 1
        retry.close()
        assert [e["custom_id"] for e in place.open().read_log()] == ["ok"]

    def test_the_results_are_read_back_as_a_run(self, place):
        store, _ = self._started(place)
        rows = [{"dialogue_id": "d1", "turn_index": 0, "verdict": True,
                 "rule": {"gold": True}, "explanation": "é"},
                {"dialogue_id": "d1", "turn_index": 1, "verdict": None,
                 "rule": {"gold": False}, "error": "no reply"}]
        summary = {"method": "two-dim", "turns": 2, "calls": {"planned": 2}}
        store.write_results(rows, summary)
        store.close()
        place.commit(store)
        run = place.open().read_run()
        assert run.rows == rows and run.summary == summary
        assert run.label == "two-dim"

    def test_a_run_without_results_is_an_input_error(self, place):
        store, _ = self._started(place)
        store.close()
        with pytest.raises(InputError):
            place.open().read_run()

    def test_a_budget_stop_resumes_without_sending_a_finished_call_again(
            self, place, tmp_path, example_data):
        """The whole run through the store: stopped by its budget, resumed from what the
        store logged; nothing is sent twice, nothing is missing, and the results are those
        of an uninterrupted run."""
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({"batch_discount": 0.5, "models": {
            "local": {"input": 1000.0, "cached_input": 1000.0, "output": 1000.0}}}))

        def run(budget: float, resume: bool) -> tuple[Any, int]:
            config = load_config({"model": "local", "use_cache": False, "concurrency": 1,
                                  "budget": budget, "prices": str(prices)})
            store = place.open()
            with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
                mount_cassette(router, "example-two-dim.json")
                try:
                    result = evaluate(config, *example_data, store=store, resume=resume,
                                      http_client=httpx.AsyncClient())
                except BudgetReached:
                    result = None
                return result, router.calls.call_count

        stopped, first = run(3.0, False)
        assert stopped is None and 0 < first < 22
        assert len(place.open().read_log()) == first
        resumed, second = run(1000.0, True)
        assert first + second == 22
        assert resumed.summary["calls"]["resumed"] == first
        assert len(place.open().read_log()) == 22

    def test_a_collected_batch_is_kept_as_a_live_run_is(self, place, tmp_path, example_data):
        """``collect`` keeps a batch's run through the store: its manifest, every answered
        call in the log, the results; collecting the same batch again continues the same run
        and logs nothing twice."""
        config = load_config({"model": "local", "use_cache": False})
        records = batch_records(config, example_data, tmp_path)
        heard: list[CallResult] = []
        store = place.open()
        result = collect(config, *example_data, records, store=store, on_result=heard.append)
        place.commit(store)
        assert len(heard) == result.summary["calls"]["planned"] == 22
        reader = place.open()
        manifest = reader.read_manifest()
        assert manifest["kind"] == "batch" and manifest["run_id"] == store.run_id
        assert sorted(reader.read_log(), key=lambda e: e["custom_id"]) == sorted(
            (_record(c) for c in heard), key=lambda e: e["custom_id"])
        run = reader.read_run()
        assert run.rows == result.rows and run.summary == result.summary

        again = place.open()
        assert collect(config, *example_data, records, store=again).rows == result.rows
        assert again.run_id == store.run_id
        assert len(place.open().read_log()) == 22
        with pytest.raises(RunConflict, match="holds another run"):
            evaluate(config, *example_data, store=place.open())
