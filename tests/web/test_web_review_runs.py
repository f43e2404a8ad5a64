"""The review queue, the label checks and the labels export, the run form's options, job labels,
sessions and the app's shared state, called in-process: a sampled mutation run found their
messages, statuses, fields, cache keys and output records unasserted."""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace
from typing import Any

import pytest

from judge._errors import ServiceError
from judge.service import job_subject, revoke_token
from judge.web import _labelfile, _queues, _review, _runs, _session
from judge.web._agreement import sample_name
from judge.web._detail import turn_view
from judge.web._state import WebState
from judge.web._viewer import COOKIE, SECRET_ENV, Viewer, check_csrf, load_secret

from .synthetic import synthetic_rows

# --- helpers -------------------------------------------------------------------------------------


def _refusal(call: Any, *args: Any) -> tuple[int, str | None, str]:
    with pytest.raises(ServiceError) as caught:
        call(*args)
    return caught.value.status, caught.value.field, caught.value.reason


def _viewer(web: dict[str, Any], name: str) -> Viewer:
    principal = web["service"].tokens.resolve_token(web["tokens"][name])
    return Viewer(principal, "csrf-secret")


def _run(web: dict[str, Any], job_id: str) -> tuple[Any, Any]:
    row = web["service"].jobs.row(_viewer(web, "alice").project_id, job_id)
    return row, web["app"].state.web.index.ready(row)


# --- _review: the label checks -------------------------------------------------------------------


INDEX = SimpleNamespace(positions={("d1", 0): 0, ("d1", 1): 1})


def test_check_label_names_the_field_status_and_message_of_each_refusal():
    """Each malformed label is refused with its own status, field and words."""
    check = _review._check_label
    assert _refusal(check, ["d1", 0], INDEX) == (422, None, "expected a JSON object")
    missing = (422, "dialogue_id", "dialogue_id (text) and turn_index (a number) are required")
    for body in ({"turn_index": 0, "label": "correct"}, {"dialogue_id": "d1", "label": "correct"},
                 {"dialogue_id": 5, "turn_index": 0, "label": "correct"},
                 {"dialogue_id": "d1", "turn_index": True, "label": "correct"},
                 {"dialogue_id": "d1", "turn_index": "0", "label": "correct"}):
        assert _refusal(check, body, INDEX) == missing, body
    assert _refusal(check, {"dialogue_id": "d1", "turn_index": 7, "label": "correct"}, INDEX) \
        == (404, "turn_index", "this run has no such turn")
    assert _refusal(check, {"dialogue_id": "d1", "turn_index": 0, "label": "maybe"}, INDEX) \
        == (422, "label", "label must be one of correct, incorrect, unsure")
    assert _refusal(check, {"dialogue_id": "d1", "turn_index": 0}, INDEX)[1] == "label"
    bad_slot = (422, "slot", "slot must be a slot name (or empty for the turn)")
    for slot in (["hotel-area"], 3, "s" * 201):
        body = {"dialogue_id": "d1", "turn_index": 0, "label": "correct", "slot": slot}
        assert _refusal(check, body, INDEX) == bad_slot, slot
    bad_note = (422, "note", "note must be text of at most 5000 characters")
    for note in (["why"], 12, "n" * 5001):
        body = {"dialogue_id": "d1", "turn_index": 0, "label": "correct", "note": note}
        assert _refusal(check, body, INDEX) == bad_note


def test_check_label_returns_the_cleaned_label():
    """Slot defaults to the turn (""), a note is stripped and a blank one is dropped; the
    longest slot (200) and note (5000) pass."""
    check = _review._check_label
    assert check({"dialogue_id": "d1", "turn_index": 1, "label": "unsure"}, INDEX) == {
        "dialogue_id": "d1", "turn_index": 1, "slot": "", "label": "unsure", "note": None,
        "blind": None}
    assert check({"dialogue_id": "d1", "turn_index": 0, "label": "incorrect", "slot": None,
                  "note": "  off by one  "}, INDEX) == {
        "dialogue_id": "d1", "turn_index": 0, "slot": "", "label": "incorrect",
        "note": "off by one", "blind": None}
    long = check({"dialogue_id": "d1", "turn_index": 0, "label": "correct", "slot": "s" * 200,
                  "note": "n" * 5000}, INDEX)
    assert long["slot"] == "s" * 200 and long["note"] == "n" * 5000
    assert check({"dialogue_id": "d1", "turn_index": 0, "label": "correct", "slot": "hotel-area",
                  "note": "   "}, INDEX)["note"] is None
    assert check({"dialogue_id": "d1", "turn_index": 0, "label": "correct",
                  "blind": True}, INDEX)["blind"] is True
    refused = _refusal(check, {"dialogue_id": "d1", "turn_index": 0, "label": "correct",
                               "blind": "yes"}, INDEX)
    assert refused[:2] == (422, "blind")


# --- _review: a reviewer's labels must not contradict each other ---------------------------------


class _Labels:
    """A label store's ``list`` that filters as the service's does and records its calls."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.calls: list[tuple[Any, ...]] = []

    def list(self, project_id: str, *, subject: str | None = None,
             reviewer: str | None = None) -> list[dict[str, Any]]:
        self.calls.append((project_id, subject, reviewer))
        return [i for i in self.items if i["project"] == project_id
                and (subject is None or i["subject"] == subject)
                and (reviewer is None or i["reviewer"] == reviewer)]


def _item(slot: str, label: str, *, reviewer: str = "alice", dialogue: str = "d1", turn: int = 0,
          subject: str = "s1", project: str = "p1") -> dict[str, Any]:
    return {"slot": slot, "label": label, "reviewer": reviewer, "dialogue_id": dialogue,
            "turn_index": turn, "subject": subject, "project": project}


def _consistent(items: list[dict[str, Any]], slot: str, label: str, *, turn: int = 0
                ) -> tuple[_Labels, tuple[int, str | None, str] | None]:
    labels = _Labels(items)
    service = SimpleNamespace(labels=labels)
    viewer = SimpleNamespace(project_id="p1", name="alice")
    values = {"dialogue_id": "d1", "turn_index": turn, "slot": slot, "label": label,
              "subject": "s1"}
    try:
        _review._consistent(service, viewer, values)
    except ServiceError as exc:
        return labels, (exc.status, exc.field, exc.reason)
    return labels, None


def test_a_correct_turn_with_a_wrong_slot_of_the_same_reviewer_is_refused():
    """Only this reviewer's labels of this turn (and subject, project) count; the message
    names the first wrong slot."""
    wrong = [_item("hotel-area", "incorrect"), _item("hotel-name", "incorrect")]
    labels, refused = _consistent(wrong, "", "correct")
    assert refused == (409, "label", "you labelled slot hotel-area incorrect; a turn with a "
                       "wrong slot is incorrect (relabel that slot first)")
    assert labels.calls == [("p1", "s1", "alice")]
    others = [_item("hotel-area", "incorrect", reviewer="bob"),
              _item("hotel-area", "incorrect", turn=1), _item("hotel-area", "incorrect",
                                                              dialogue="d2"),
              _item("hotel-area", "incorrect", subject="s2"),
              _item("hotel-area", "incorrect", project="p2"),
              _item("hotel-area", "correct"), _item("", "incorrect")]
    assert _consistent(others, "", "correct")[1] is None
    assert _consistent(wrong, "", "incorrect")[1] is None  # a wrong turn may hold wrong slots
    assert _consistent(wrong, "hotel-area", "correct")[1] is None


def test_a_wrong_slot_of_a_turn_labelled_correct_is_refused():
    turn_correct = [_item("", "correct"), _item("hotel-area", "correct")]
    refused = _consistent(turn_correct, "hotel-name", "incorrect")[1]
    assert refused == (409, "label", "you labelled this turn correct; label it incorrect (or "
                       "unsure) before marking a slot wrong")
    assert _consistent([_item("hotel-area", "correct")], "hotel-name", "incorrect")[1] is None
    assert _consistent([_item("", "unsure")], "hotel-name", "incorrect")[1] is None
    assert _consistent([_item("", "correct", reviewer="bob")], "hotel-name",
                       "incorrect")[1] is None
    assert _consistent([_item("", "correct", turn=1)], "hotel-name", "incorrect")[1] is None
    assert _consistent(turn_correct, "", "incorrect")[1] is None


def test_unsure_labels_are_never_checked():
    labels, refused = _consistent([_item("", "correct"), _item("a", "incorrect")], "", "unsure")
    assert refused is None and labels.calls == []
    labels, refused = _consistent([_item("", "correct")], "a", "unsure")
    assert refused is None and labels.calls == []


# --- _review: queue parameters, queues and the item shown ---------------------------------------


def test_queue_parameters_fall_back_to_disagreements_and_carry_n_and_seed_for_samples():
    choice = _queues.SampleChoice(None, 12, 4, True, False, "note")
    assert _review._params("sample", choice) == {"queue": "sample", "n": 12, "seed": 4}
    assert _review._params("sample", choice, reveal=True) == {
        "queue": "sample", "n": 12, "seed": 4, "reveal": 1}
    assert _review._params("candidates", None) == {"queue": "candidates"}
    assert _review._params("disagreements", None) == {"queue": "disagreements"}
    assert _review._params("nonsense", None) == {"queue": "disagreements"}


def test_queues_are_cached_per_kind_and_a_sample_per_size_and_seed(web, synthetic_run):
    """A sample queue is its own per (n, seed), drawn as ``draw``/``sample_queue`` by a
    reviewer's draw and stored in the file store under the run's name, replaced while no turn
    of it has a label; asking for a sample never draws one; the disagreements queue ignores n
    and seed."""
    queues = web["app"].state.web.queues
    row, index = _run(web, synthetic_run)
    nothing, choice = queues.get(row, index, "sample", 6, 1)
    assert nothing == [] and choice.missing and choice.estimate
    queues.draw(row, index, 6, 1)
    one, choice = queues.get(row, index, "sample", 6, 1)
    assert one == _queues.sample_queue(_queues.draw(index, 6, 1), 1) and len(one) == 6
    assert choice.estimate and not choice.fixed
    assert queues.get(row, index, "sample", 6, 1)[0] == one
    assert queues.get(row, index, "sample")[0] == one  # no n, seed: the run's sample
    other, choice = queues.get(row, index, "sample", 6, 2)
    assert other == [] and choice.missing and "drawing this one replaces it" in choice.note
    queues.draw(row, index, 6, 2)
    assert queues.get(row, index, "sample", 6, 2)[0] == _queues.sample_queue(
        _queues.draw(index, 6, 2), 2)
    queues.draw(row, index, 7, 1)
    assert queues.get(row, index, "sample", 7, 1)[0] == _queues.sample_queue(
        _queues.draw(index, 7, 1), 1)
    names = [f["name"] for f in web["service"].files.list(row.project_id, kind="sample")]
    assert names.count(sample_name(synthetic_run)) == 1  # replaced while unlabelled
    first, none = queues.get(row, index, "disagreements", 6, 1)
    assert first == _queues.disagreement_queue(index) and first and none is None
    assert queues.get(row, index, "disagreements", 9, 3)[0] is first


def test_the_queue_cache_is_emptied_once_it_holds_more_than_32(web, synthetic_run):
    queues = web["app"].state.web.queues
    row, index = _run(web, synthetic_run)
    queues.items.clear()
    queues.items.update({("filler", i): [] for i in range(32)})
    queues.get(row, index, "disagreements", 1, 0)
    assert len(queues.items) == 33  # 32 before: kept
    queues.get(row, index, "disagreements", 1, 0)
    assert len(queues.items) == 33  # a hit adds nothing
    queues.items[("filler", 99)] = []
    queues.items.pop((row.id, index.key, "disagreements", 0, 0))
    queues.get(row, index, "disagreements", 1, 0)
    assert len(queues.items) == 1  # 33 before: emptied, then the new queue


def test_an_empty_queue_shows_no_item(web, synthetic_run):
    row, index = _run(web, synthetic_run)
    context = _review._item_context(web["app"].state.web, web["service"],
                                    _viewer(web, "alice"), row, index, [],
                                    3, {"queue": "sample", "n": 5, "seed": 0})
    assert context == {"item": None, "pos": 0, "size": 0, "job_id": synthetic_run,
                       "params": {"queue": "sample", "n": 5, "seed": 0}}


def test_the_item_shown_is_clamped_to_the_queue_with_this_reviewers_labels(web, synthetic_run):
    row, index = _run(web, synthetic_run)
    service = web["service"]
    alice, reader = _viewer(web, "alice"), _viewer(web, "reader")
    rows = synthetic_rows(160, seed=3)
    queue = [(r["dialogue_id"], r["turn_index"], f"why {n}") for n, r in enumerate(rows[:3])]
    target = rows[2]
    for who, slot, label in ((alice, "", "incorrect"), (alice, "hotel-area", "incorrect"),
                             (_viewer(web, "bob"), "hotel-name", "correct")):
        service.labels.put(who.principal, {"dialogue_id": target["dialogue_id"],
                                           "turn_index": target["turn_index"], "slot": slot,
                                           "label": label, "subject": job_subject(row),
                                           "job_id": synthetic_run})
    service.labels.put(alice.principal, {"dialogue_id": rows[1]["dialogue_id"],
                                         "turn_index": rows[1]["turn_index"], "slot": "",
                                         "label": "correct", "subject": job_subject(row),
                                         "job_id": synthetic_run})
    params = {"queue": "disagreements"}
    context = _review._item_context(web["app"].state.web, web["service"],
                                    alice, row, index, queue, 99, params)
    assert context["item"] == {"dialogue_id": target["dialogue_id"],
                               "turn_index": target["turn_index"], "why": "why 2"}
    assert context["pos"] == 2 and context["size"] == 3 and context["params"] is params
    assert context["job_id"] == synthetic_run and context["can_label"] is True
    assert sorted(context["mine"]) == ["", "hotel-area"]
    assert context["mine"]["hotel-area"]["label"] == "incorrect"
    dialogue = web["app"].state.web.reads.dialogue_rows(alice.project_id, synthetic_run,
                                                        target["dialogue_id"])
    assert context["view"] == turn_view(dialogue, target["turn_index"])
    first = _review._item_context(web["app"].state.web, web["service"],
                                  reader, row, index, queue, 0, params)
    assert first["pos"] == 0 and first["item"]["why"] == "why 0"
    assert first["mine"] == {} and first["can_label"] is False


# --- _runs: the run form's options ---------------------------------------------------------------


def test_the_form_options_are_described_by_judge_config():
    """Every judge option's flag, type, choices, optionality, default, help and limits."""
    fields = {f["name"]: f for f in _runs.option_fields()}
    assert list(fields) == list(_runs.JUDGE_FIELDS)
    assert fields["method"] == {
        "name": "method", "flag": "--method", "kind": "choice",
        "choices": ["two-dim", "two-dim-cot", "direct", "cot"], "optional": False,
        "default": "two-dim", "limits": {},
        "help": "two-dim (the paper's method), two-dim-cot, direct or cot (the paper's "
                "baselines)."}
    assert fields["rule_match"]["choices"] == ["exact", "nospace"]
    assert fields["rule_match"]["optional"] is True and fields["rule_match"]["default"] is None
    assert fields["temperature"] == {
        "name": "temperature", "flag": "--temperature", "kind": "float", "choices": None,
        "optional": False, "default": 0.0, "help": "Sampling temperature (the paper: 0).",
        "limits": {"ge": 0.0, "le": 2.0}}
    assert fields["top_p"]["limits"] == {"gt": 0.0, "le": 1.0}
    assert fields["seed"]["kind"] == "int" and fields["seed"]["optional"] is True
    assert fields["max_tokens"]["flag"] == "--max-tokens"
    assert fields["max_tokens"]["default"] == 1024
    assert fields["max_tokens"]["limits"] == {"ge": 16}
    assert fields["prompt_cache_key"]["kind"] == "bool"
    assert fields["prompt_cache_key"]["default"] is False
    assert fields["budget"]["kind"] == "float" and fields["budget"]["optional"] is True
    assert fields["budget"]["limits"] == {"gt": 0}
    assert list(fields.values()) == _runs.OPTION_FIELDS


def test_field_annotations_give_choices_type_and_optionality():
    from typing import Literal, Optional, Union

    assert _runs._choices(Literal["a", "b"]) == (["a", "b"], "choice", False)
    assert _runs._choices(Literal["a"] | None) == (["a"], "choice", True)
    assert _runs._choices(Optional[int]) == (None, "int", True)  # noqa: UP045
    assert _runs._choices(float | None) == (None, "float", True)
    assert _runs._choices(bool) == (None, "bool", False)
    assert _runs._choices(int) == (None, "int", False)
    assert _runs._choices(str) == (None, "str", False)
    assert _runs._choices(list[str]) == (None, "str", False)
    assert _runs._choices(Union[int, str]) == (None, "str", False)  # noqa: UP007
    assert _runs._choices(int | str | None) == (None, "str", True)


def test_an_unticked_checkbox_still_reads_the_options_after_it():
    """A bool option sets True when ticked and nothing when not; the options after it (and
    endpoint/model) are read either way."""
    assert _runs.parse_options({"prompt_cache_key": "", "budget": "2.5", "endpoint": " e ",
                                "concurrency": "3"}) == {
        "budget": 2.5, "endpoint": "e", "concurrency": 3}
    ticked = _runs.parse_options({"prompt_cache_key": "on", "budget": "2.5"})
    assert ticked == {"prompt_cache_key": True, "budget": 2.5}
    assert ticked["prompt_cache_key"] is True
    assert _runs.parse_options({"top_p": "half", "rule_match": " exact ", "semantics": "",
                                "budget": "x"}) == {"top_p": "half", "rule_match": "exact",
                                                    "budget": "x"}
    assert _runs.parse_options({"limit": " 12 ", "dialogue_ids": "  "}) == {"limit": 12}
    assert _runs.parse_options({"limit": "1.5", "dialogue_ids": 5}) == {"limit": "1.5"}
    assert _runs.parse_options({"model": 7, "endpoint": "  "}) == {}


def test_form_errors_are_shown_at_the_field_at_fault():
    assert _runs._form_field(None) == "_form"
    assert _runs._form_field("") == "_form"
    assert _runs._form_field("options.top_p") == "top_p"
    assert _runs._form_field("inputs.schema") == "schema"
    assert _runs._form_field("options.dialogue_ids[2]") == "dialogue_ids"
    assert _runs._form_field("options.budget.value") == "budget"
    assert _runs._form_field("options") == "options"
    assert _runs._form_field("limit") == "limit"
    assert _runs._form_field("other.x") == "other.x"


def test_the_submit_form_lists_this_projects_files_and_the_endpoints(web):
    viewer = _viewer(web, "alice")
    service = web["service"]
    context = _runs._form_context(web["service"],
                                  viewer, {"a": "1"}, {"b": "2"},
                                  {"c": "3"})
    assert set(context["files"]) == {"schema", "dialogues", "predictions", "rules"}
    for kind in context["files"]:
        assert context["files"][kind] == service.files.list(viewer.project_id, kind=kind,
                                                            limit=200)
    assert context["file_inputs"] == _runs.FILE_INPUTS
    assert context["options"] == _runs.OPTION_FIELDS
    endpoint = web["settings"].all_endpoints()["fake"]
    assert context["endpoints"] == [{"name": "fake", "models": endpoint.models or [],
                                     "default_model": endpoint.default_model,
                                     "max_concurrency": endpoint.max_concurrency}]
    assert context["default_endpoint"] == "fake"
    assert (context["values"], context["errors"], context["chosen"]) == (
        {"a": "1"}, {"b": "2"}, {"c": "3"})
    assert context["max_upload_mb"] == 16


# --- _runs: what a job is called and its live fields ---------------------------------------------


def _label(job: dict[str, Any], names: dict[str, str] | None = None) -> str:
    known = names or {}
    web = SimpleNamespace(file_label=lambda project_id, file_id: known.get(file_id))
    viewer = SimpleNamespace(project_id="p1")
    return _runs.job_label(web, viewer, job)


def test_a_judge_run_is_called_by_its_system_and_method():
    assert _label({"id": "j1", "kind": "evaluate", "inputs": {"predictions": "f1"},
                   "options": {"method": "direct"}}, {"f1": "sys-a"}) == "sys-a · direct"
    assert _label({"id": "j1", "kind": "retry-errors", "inputs": {"predictions": "f1"},
                   "options": None}, {"f1": "sys-a"}) == "sys-a · two-dim"
    assert _label({"id": "j1", "kind": "evaluate", "inputs": {"predictions": "f9"},
                   "options": {}}) == "j1 · two-dim"
    bundle = {"bundle": {"inputs": {"predictions": {"name": "sys-b"}}}}
    assert _label({"id": "j2", "kind": "evaluate", "inputs": bundle,
                   "options": {"method": "cot"}}) == "sys-b · cot"
    assert _label({"id": "j2", "kind": "evaluate", "inputs": {**bundle, "predictions": "f1"}},
                  {"f1": "sys-a"}) == "sys-a · two-dim"
    assert _label({"id": "j3", "kind": "evaluate",
                   "inputs": {"bundle": {"inputs": {"predictions": "x"}}}}) == "j3 · two-dim"
    assert _label({"id": "j3", "kind": "evaluate", "inputs": {"bundle": "x"}}) == "j3 · two-dim"
    assert _label({"id": "j4", "kind": "evaluate", "inputs": None}) == "j4 · two-dim"
    assert _label({"id": "j4", "kind": "evaluate"}) == "j4 · two-dim"


def test_other_jobs_are_called_by_their_kind_and_inputs():
    assert _label({"id": "a", "kind": "agreement", "inputs": {"run": "j1"}}) == "agreement of j1"
    assert _label({"id": "a", "kind": "audit", "inputs": {"run": "j2"}}) == "audit of j2"
    assert _label({"id": "c", "kind": "compare", "inputs": {"runs": ["j1", "j2"]}}) \
        == "compare 2 runs"
    assert _label({"id": "c", "kind": "compare", "inputs": {"runs": ["j1"]}}) == "compare 1 run"
    assert _label({"id": "c", "kind": "compare", "inputs": {}}) == "compare 0 runs"
    assert _label({"id": "m", "kind": "metrics", "inputs": {"run": "j1"}}) == "metrics"


def test_live_fields_are_the_runs_progress_and_headline():
    job = {"id": "j1", "status": "running", "exit_meaning": "ok", "error": None,
           "cancel_requested": True, "extra": 1,
           "progress": {"done": 3, "total": 10, "cost_usd": 0.5, "errors": 1, "cache_hits": 2,
                        "eta_seconds": 9, "tokens": 40, "other": 5},
           "headline": {"tsa": 0.9, "judge_jga": 0.4, "rule_agreement": {"v1": 0.8}, "x": 1}}
    assert _runs.live_fields(job) == {
        "id": "j1", "status": "running", "exit_meaning": "ok", "error": None,
        "cancel_requested": True, "is_running": True, "final": False, "has_results": False,
        "progress": {"done": 3, "total": 10, "cost_usd": 0.5, "errors": 1, "cache_hits": 2,
                     "eta_seconds": 9, "tokens": 40},
        "headline": {"tsa": 0.9, "judge_jga": 0.4, "rule_agreement": {"v1": 0.8}}}
    bare = _runs.live_fields({"id": "j2", "status": "queued", "progress": None,
                              "headline": None})
    assert bare == {"id": "j2", "status": "queued", "exit_meaning": None, "error": None,
                    "cancel_requested": None, "is_running": False, "final": False,
                    "has_results": False,
                    "progress": dict.fromkeys(("done", "total", "cost_usd", "errors",
                                               "cache_hits", "eta_seconds", "tokens")),
                    "headline": {"tsa": None, "judge_jga": None, "rule_agreement": {}}}
    stopped = _runs.live_fields({"id": "j3", "status": "stopped"})
    assert (stopped["is_running"], stopped["final"], stopped["has_results"]) == (False, True, True)


# --- _labelfile: the labels export ---------------------------------------------------------------


SHA = "ab" * 32


def _row(reviewer: str, dialogue: str, turn: int, slot: str, label: str, at: float,
         note: str | None = None, subject: str = SHA) -> dict[str, Any]:
    return {"reviewer": reviewer, "dialogue_id": dialogue, "turn_index": turn, "slot": slot,
            "label": label, "updated_at": at, "note": note, "subject": subject}


def test_label_rows_become_one_record_per_reviewer_and_turn():
    """Turn label 1/0/null+unsure, the last change's time, the note, the predictions digest
    and per-slot labels with the predicted value, sorted by dialogue, turn and reviewer."""
    items = [
        _row("bob", "d2", 0, "", "correct", 100.0),
        _row("alice", "d1", 1, "", "incorrect", 10.0, note="turn note"),
        _row("alice", "d1", 1, "hotel-name", "unsure", 30.0, note="slot note"),
        _row("alice", "d1", 1, "hotel-area", "incorrect", 20.0),
        _row("alice", "d1", 0, "", "unsure", 0.0, subject="job:j1"),
        _row("zed", "d1", 1, "hotel-area", "correct", 5.0),
        _row("carol", "d1", 1, "hotel-area", "incorrect", 7.0),
    ]
    predicted = {("d1", 1): {"hotel-area": "north", "hotel-name": 3}}
    records = _labelfile.label_records(items, predicted)
    assert records == [
        {"dialogue_id": "d1", "turn_index": 0, "label": None, "unsure": True,
         "reviewer": "alice", "time": "1970-01-01T00:00:00Z"},
        {"dialogue_id": "d1", "turn_index": 1, "label": 0, "reviewer": "alice",
         "time": "1970-01-01T00:00:30Z", "predictions_sha256": SHA, "note": "turn note",
         "slots": {"hotel-area": {"label": 0, "value": "north"},
                   "hotel-name": {"label": None, "unsure": True, "value": None,
                                  "note": "slot note"}}},
        {"dialogue_id": "d1", "turn_index": 1, "label": 0, "reviewer": "carol",
         "time": "1970-01-01T00:00:07Z", "predictions_sha256": SHA,
         "slots": {"hotel-area": {"label": 0, "value": "north"}}},
        {"dialogue_id": "d1", "turn_index": 1, "label": None, "unsure": True, "reviewer": "zed",
         "time": "1970-01-01T00:00:05Z", "predictions_sha256": SHA,
         "slots": {"hotel-area": {"label": 1, "value": "north"}}},
        {"dialogue_id": "d2", "turn_index": 0, "label": 1, "reviewer": "bob",
         "time": "1970-01-01T00:01:40Z", "predictions_sha256": SHA},
    ]
    assert list(records[1]["slots"]) == ["hotel-area", "hotel-name"]
    assert list(records[1]) == ["dialogue_id", "turn_index", "label", "reviewer", "time",
                                "predictions_sha256", "note", "slots"]
    without = _labelfile.label_records([_row("a", "d1", 1, "hotel-area", "correct", 0.0)])
    assert without[0]["slots"] == {"hotel-area": {"label": 1, "value": None}}


def test_records_are_grouped_by_turn_with_numeric_turn_order():
    items = [_row("a", "d1", 10, "", "correct", 0.0), _row("a", "d1", 2, "", "correct", 0.0),
             _row("a", "d1", "2", "s", "correct", 1.0)]
    records = _labelfile.label_records(items)
    assert [(r["turn_index"], "slots" in r) for r in records] == [(2, True), (10, False)]
    assert _labelfile._grouped(items) == {("a", "d1", 10): [items[0]],
                                          ("a", "d1", 2): [items[1], items[2]]}


def test_human_labels_read_the_records_and_none_when_empty():
    assert _labelfile.human_labels([]) is None
    records = _labelfile.label_records([_row("a", "d1", 0, "", "correct", 0.0),
                                        _row("b", "d1", 0, "", "incorrect", 0.0)])
    labels = _labelfile.human_labels(records)
    assert labels is not None and len(labels.records) == 2
    assert labels.path == "(service labels)"
    assert sorted(labels.annotators) == ["a", "b"]


# --- _session: secrets, sessions, CSRF, the login form -------------------------------------------


def test_the_session_secret_comes_from_the_environment_or_a_private_file(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "shared")
    assert load_secret(tmp_path / "a") == b"shared"
    assert not (tmp_path / "a" / "web-secret").exists()
    monkeypatch.delenv(SECRET_ENV)
    made = load_secret(tmp_path / "b" / "c")
    path = tmp_path / "b" / "c" / "web-secret"
    assert len(made) == 64 and path.read_bytes() == made
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_secret(tmp_path / "b" / "c") == made
    path.write_bytes(b"kept\n")
    assert load_secret(tmp_path / "b" / "c") == b"kept"
    monkeypatch.setenv(SECRET_ENV, "")
    assert load_secret(tmp_path / "b" / "c") == b"kept"


def test_a_session_cookie_opens_to_its_session_only_when_genuine(web):
    sessions = web["app"].state.web.sessions
    token_id = web["service"].tokens.resolve_token(web["tokens"]["runner"]).token_id
    cookie = sessions.issue(token_id)
    session = sessions.open(cookie)
    csrf = sessions.csrf(session)
    assert session and len(csrf) >= 24 and session not in cookie
    again = sessions.open(sessions.issue(token_id))
    assert again != session and sessions.csrf(again) != csrf  # a new session and CSRF each time
    assert sessions.open(None) is None and sessions.open("") is None
    assert sessions.open("garbage") is None and sessions.open("é") is None
    assert sessions.open(cookie[:-4] + "AAAA") is None
    for payload in (b"[1]", b'{"c": "x"}', b'{"t": 5}', b"not json", b'{"s": "z"}',
                    b'{"v": 2, "s": 5}', b'{"v": 2, "s": ""}',
                    b'{"t": "x", "c": "y", "s": "z"}'):  # no session, or the old format
        assert sessions.open(sessions.fernet.encrypt(payload).decode()) is None, payload
    assert sessions.open(sessions.fernet.encrypt(b'{"v": 2, "s": "z"}').decode()) == "z"


def test_a_viewer_is_the_tokens_principal_and_is_kept_for_the_request(web):
    sessions = web["app"].state.web.sessions
    runner = web["service"].tokens.resolve_token(web["tokens"]["runner"]).token_id
    cookie = sessions.issue(runner)
    request = SimpleNamespace(cookies={COOKIE: cookie}, state=SimpleNamespace())
    viewer = sessions.viewer(request)
    assert (viewer.name, viewer.project) == ("runner", "lab")
    assert viewer.project_id == viewer.principal.project_id
    assert viewer.csrf == sessions.csrf(sessions.open(cookie))
    assert request.state.viewer is viewer and sessions.viewer(request) is viewer
    assert viewer.can("submit") and not viewer.can("review")
    assert _refusal(viewer.require, "review") == (403, None,
                                                  "your token lacks the 'review' scope")
    viewer.require("read")
    empty = SimpleNamespace(cookies={}, state=SimpleNamespace())
    assert _refusal(sessions.viewer, empty) == (401, None, "please log in with your token")
    revoked = SimpleNamespace(cookies={COOKIE: sessions.issue(runner)}, state=SimpleNamespace())
    revoke_token(web["service"].db, runner)
    assert _refusal(sessions.viewer, revoked) == (
        401, None, "your token was revoked; log in with another")


def test_csrf_tokens_must_match_the_sessions():
    viewer = SimpleNamespace(csrf="secret")
    check_csrf(viewer, "secret")
    stale = (403, None, "the form's security token is missing or stale; reload the page and "
             "try again")
    for given in (None, "", "secreT", "secret2"):
        assert _refusal(check_csrf, viewer, given) == stale
    assert _refusal(check_csrf, SimpleNamespace(csrf=""), "") == stale


def test_only_paths_of_the_interface_are_followed_after_login():
    for target in (None, "", "/", "/ui", "//evil.example/ui/", "https://x/ui/", "/ui/\\x",
                   "/ui/a\nb", "/ui/\x00", "/uix/"):
        assert _session._safe_next(target) == "/ui/", target
    for target in ("/ui/", "/ui/runs/j1?x=1", "/ui/compare"):
        assert _session._safe_next(target) == target


def test_a_refused_login_shows_the_form_again_with_a_fresh_form_token(web):
    client = web["client"]()
    page = client.get("/ui/login")
    nonce = client.client.cookies.get(_session.LOGIN_COOKIE)
    assert nonce and f'value="{nonce}"' in page.text
    wrong = client.post("/ui/login", data={"token": "nope", "csrf": nonce, "next": "/ui/x"})
    assert wrong.status_code == 401 and "That token is not valid (or was revoked)." in wrong.text
    header = next(h for h in wrong.headers.get_list("set-cookie")
                  if h.startswith(_session.LOGIN_COOKIE + "="))
    fresh = header.split(";")[0].split("=", 1)[1]
    assert fresh and fresh != nonce
    lowered = header.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/ui" in lowered
    assert "max-age=3600" in lowered and "secure" not in lowered.replace("samesite", "")
    assert f'value="{fresh}"' in wrong.text and 'value="/ui/x"' in wrong.text
    stale = client.post("/ui/login", data={"token": web["tokens"]["alice"], "csrf": "bad",
                                           "next": "/ui/"})
    assert stale.status_code == 403 and "The login form expired; please try again." in stale.text


# --- _app: the shared state and the routes -------------------------------------------------------


def test_a_files_label_is_its_system_name_or_file_name_and_is_remembered():
    calls: list[tuple[str, str]] = []
    records = {"f1": {"name": "preds.jsonl", "info": {"system_name": "sys-a"}},
               "f2": {"name": "other.jsonl", "info": None}, "f3": {"name": "x.jsonl"}}

    def get(project_id: str, file_id: str) -> dict[str, Any]:
        calls.append((project_id, file_id))
        if file_id not in records:
            raise ServiceError("no such file", status=404)
        return records[file_id]

    service = SimpleNamespace(files=SimpleNamespace(get=get))
    state = object.__new__(WebState)
    state.service, state._labels = service, {}
    assert state.file_label("p1", "f1") == "sys-a"
    assert state.file_label("p1", "f2") == "other.jsonl"
    assert state.file_label("p1", "f3") == "x.jsonl"
    assert state.file_label("p1", "nope") is None
    assert state.file_label("p1", "f1") == "sys-a"
    assert calls == [("p1", "f1"), ("p1", "f2"), ("p1", "f3"), ("p1", "nope")]


def test_the_web_state_shares_one_service_reads_index_and_queues(web):
    state = web["app"].state.web
    assert isinstance(state, WebState) and state.service is web["service"]
    assert state.queues.service is web["service"] and state.queues.reads is state.reads
    assert state.queues.board is state.agreement and state.index.reads is state.reads
    assert state.sessions is state.sessions and state._labels == {}


def test_the_router_puts_every_page_under_ui_and_the_home_redirects(web):
    """The login form is open, every other page needs a session (the guard), and the
    security headers are on pages and static files alike."""
    client = web["client"]()
    assert client.get("/ui/login").status_code == 200
    for path in ("/ui/", "/ui/review", "/ui/runs/new"):
        refused = client.get(path)
        assert refused.status_code == 303 and refused.headers["location"].startswith(
            "/ui/login?next="), path
    assert client.post("/ui/logout").status_code == 401
    home = client.get("/")
    assert home.status_code == 307 and home.headers["location"] == "/ui/"
    css = client.get("/ui/static/style.css")
    assert css.status_code == 200 and "content-security-policy" in css.headers
