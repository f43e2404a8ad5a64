"""Annotation review: a queue of turns, one at a time, labelled with one key press.

Queues:

* ``candidates`` — label-error candidates ranked by evidence, where ``judge.analysis`` offers
  ``find_candidates`` (the agreement work); one entry per turn, at its best candidate's rank;
* ``disagreements`` — turns where the judge and a RULE verdict disagree, the direction "judge
  accepts what the annotation rejects" first (the one that most often points at a gold
  error), then by how many annotation versions disagree, then in run order;
* ``sample`` — a seeded simple random sample of the run's turns (``judge.analysis.draw_sample``
  with the ``random`` design, as ``dst-judge labels sample`` draws by default), for measuring
  agreement without the bias of labelling disagreements only and for the estimates; the
  agreement panel then adds the population estimates of that sample (and the judge,
  labels-only and prediction-powered TSA estimates). A reviewer draws it with an explicit
  ``POST`` (the page offers the form; opening a page never draws or stores anything). The
  sample is kept in the project's file store and referenced by id, so every replica sees it,
  and it is fixed once a turn of it has a label: another ``n`` or ``seed`` then draws a
  separate sample (see ``_agreement``), whose labels count for agreement but not for the
  estimates. A separate sample starts empty: its queue shows as labelled only the labels given
  (or changed) after it was created, not the turns labelled under the estimate sample (a label
  stays one reviewer's verdict on a turn, wherever given). The disagreement queue stays for
  finding errors; its labels never make an estimate.

  The sample queue is labelled *blind* by default: its page hides the judge's verdict, the
  RULE verdicts, the gold and the judge's replies, since labels anchored on the judge would
  break the independence the prediction-powered estimate rests on; each label records whether
  it was given so (``blind``). A reviewer may show them (``reveal=1``); labels given then
  record ``blind: false``.

A label is one ``PUT`` into the service's label store (reviewer = the token's name, with the
time); the page's script sends it and swaps in the next turn, which it has fetched already.
Labels belong to the run's predictions (the store's *subject*), not to the run: every judge
run on the same predictions file shows and counts the same labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from .._errors import ServiceError
from ..service import JobRow, JobStatus, Service, ServiceDep, attachment, job_subject
from ._agreement import label_counts, labels_since
from ._common import PREFIX, WebRoute, json_body, render
from ._detail import turn_view
from ._index import RunIndex
from ._labelfile import label_records
from ._queues import DEFAULT_SAMPLE, QueueItem, SampleChoice
from ._runs import job_label
from ._session import CurrentViewer, needs
from ._state import WebDep, WebState
from ._viewer import Viewer

router = APIRouter(route_class=WebRoute)
QUEUES = {"disagreements": "judge / RULE disagreements",
          "sample": "random sample (for agreement and estimates)",
          "candidates": "label-error candidates, ranked by evidence"}
LABELS = ("correct", "incorrect", "unsure")


def _queue(queue: str) -> str:
    return queue if queue in QUEUES else "disagreements"


def _params(queue: str, choice: SampleChoice | None, reveal: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"queue": _queue(queue)}
    if choice is not None:
        params.update(n=choice.n, seed=choice.seed)
        if reveal:
            params["reveal"] = 1
    return params


def _judge_run(web: WebState, service: Service, viewer: Viewer,
               job_id: str) -> tuple[JobRow, RunIndex]:
    row = service.jobs.row(viewer.project_id, job_id)
    if row.kind not in ("evaluate", "retry-errors") or row.summary is None:
        raise ServiceError("only finished judge runs can be reviewed", status=409)
    return row, web.index.ready(row)


def _mine(service: Service, viewer: Viewer, row: JobRow,
          choice: SampleChoice | None) -> list[Mapping[str, Any]]:
    """This reviewer's labels of the run, as the queue counts them: a separate sample's
    queue only those given since it was created."""
    labels = service.labels.list(viewer.project_id, subject=job_subject(row),
                                 reviewer=viewer.name)
    return labels_since(labels, None if choice is None else choice.since)


def _item_context(web: WebState, service: Service, viewer: Viewer, row: JobRow,
                  index: RunIndex, queue: list[QueueItem], pos: int, params: dict[str, Any],
                  choice: SampleChoice | None = None) -> dict[str, Any]:
    if not queue:
        return {"item": None, "pos": 0, "size": 0, "params": params, "job_id": row.id}
    pos = max(0, min(pos, len(queue) - 1))
    dialogue_id, turn_index, why = queue[pos]
    rows = web.reads.dialogue_rows(viewer.project_id, row.id, dialogue_id)
    view = turn_view(rows, turn_index)
    mine = {item["slot"]: item for item in _mine(service, viewer, row, choice)
            if item["dialogue_id"] == dialogue_id and item["turn_index"] == turn_index}
    return {"item": {"dialogue_id": dialogue_id, "turn_index": turn_index, "why": why},
            "view": view, "mine": mine, "pos": pos, "size": len(queue), "params": params,
            "job_id": row.id, "can_label": viewer.can("review"),
            "blind": choice is not None and "reveal" not in params}


def _first_open(service: Service, viewer: Viewer, row: JobRow,
                queue: list[QueueItem], choice: SampleChoice | None = None) -> int:
    """The first queue position this reviewer has not labelled (at the turn level)."""
    done = {(i["dialogue_id"], i["turn_index"]) for i in _mine(service, viewer, row, choice)
            if not i["slot"]}
    for position, (dialogue_id, turn_index, _) in enumerate(queue):
        if (dialogue_id, turn_index) not in done:
            return position
    return max(0, len(queue) - 1)


@router.get("/review")
def review_index(request: Request, viewer: CurrentViewer, web: WebDep,
                 service: ServiceDep) -> Response:
    finished = service.jobs.list(viewer.project_id, status=JobStatus.SUCCEEDED, limit=200)
    runs = [j for j in finished if j["kind"] in ("evaluate", "retry-errors")]
    audits = [{"job": j, "label": job_label(web, viewer, j)} for j in finished
              if j["kind"] == "audit" and "run" not in (j.get("inputs") or {})]
    counts: dict[str, dict[str, int]] = {}
    for item in service.labels.list(viewer.project_id):
        entry = counts.setdefault(str(item["subject"]), {"labels": 0, "mine": 0})
        entry["labels"] += 1
        entry["mine"] += item["reviewer"] == viewer.name
    items = [{"job": j, "label": job_label(web, viewer, j),
              "counts": counts.get(service.labels.subject_of_job(viewer.project_id, j["id"]),
                                   {"labels": 0, "mine": 0})} for j in runs]
    return render(request, "review_index.html", items=items, queues=QUEUES,
                  default_sample=DEFAULT_SAMPLE, audits=audits)


@router.get("/review/{job_id}")
def review_page(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                job_id: str, queue: str = "disagreements",
                n: Annotated[int | None, Query(ge=1, le=5000)] = None, seed: int | None = None,
                pos: Annotated[int | None, Query(ge=0)] = None, reveal: bool = False
                ) -> Response:
    row, index = _judge_run(web, service, viewer, job_id)
    items, choice = web.queues.get(row, index, _queue(queue), n, seed)
    params = _params(queue, choice, reveal)
    start = pos if pos is not None else _first_open(service, viewer, row, items,
                                                    choice)
    context = _item_context(web, service, viewer, row, index, items, start, params, choice)
    context["sample_note"] = choice.note if choice is not None else None
    context["to_draw"] = choice is not None and choice.missing
    job = service.jobs.get(viewer.project_id, job_id)
    panel = web.agreement.panel(viewer.project_id, row, index, viewer.name)
    return render(request, "review.html", **context, job=job,
                  label=job_label(web, viewer, job), queues=QUEUES,
                  panel=panel, labels=LABELS)


@router.get("/review/{job_id}/item")
def review_item(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                job_id: str, queue: str = "disagreements",
                n: Annotated[int | None, Query(ge=1, le=5000)] = None, seed: int | None = None,
                pos: Annotated[int, Query(ge=0)] = 0, reveal: bool = False) -> Response:
    row, index = _judge_run(web, service, viewer, job_id)
    items, choice = web.queues.get(row, index, _queue(queue), n, seed)
    params = _params(queue, choice, reveal)
    context = _item_context(web, service, viewer, row, index, items, pos, params, choice)
    return render(request, "_review_item.html", **context, labels=LABELS)


@router.get("/review/{job_id}/agreement")
def review_agreement(request: Request, viewer: CurrentViewer, web: WebDep,
                     service: ServiceDep, job_id: str) -> Response:
    row, index = _judge_run(web, service, viewer, job_id)
    panel = web.agreement.panel(viewer.project_id, row, index, viewer.name)
    return render(request, "_agreement.html", panel=panel, job_id=job_id)


def _check_label(body: Any, index: RunIndex) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ServiceError("expected a JSON object", status=422)
    dialogue_id, turn_index = body.get("dialogue_id"), body.get("turn_index")
    if not isinstance(dialogue_id, str) or isinstance(turn_index, bool) \
            or not isinstance(turn_index, int):
        raise ServiceError("dialogue_id (text) and turn_index (a number) are required",
                           status=422, field="dialogue_id")
    if (dialogue_id, turn_index) not in index.positions:
        raise ServiceError("this run has no such turn", status=404, field="turn_index")
    label = body.get("label")
    if label not in LABELS:
        raise ServiceError(f"label must be one of {', '.join(LABELS)}", status=422,
                           field="label")
    slot = body.get("slot") or ""
    if not isinstance(slot, str) or len(slot) > 200:
        raise ServiceError("slot must be a slot name (or empty for the turn)", status=422,
                           field="slot")
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > 5000):
        raise ServiceError("note must be text of at most 5000 characters", status=422,
                           field="note")
    blind = body.get("blind")
    if blind is not None and not isinstance(blind, bool):
        raise ServiceError("blind must be true or false (was the label given with the "
                           "verdicts and the gold hidden?)", status=422, field="blind")
    return {"dialogue_id": dialogue_id, "turn_index": turn_index, "slot": slot,
            "label": label, "note": (note or "").strip() or None, "blind": blind}


def _consistent(service: Service, viewer: Viewer, values: dict[str, Any]) -> None:
    """A turn labelled correct cannot have a slot labelled incorrect by the same reviewer
    (the labels file would contradict itself); say which label to change."""
    if values["label"] not in ("correct", "incorrect"):
        return
    mine = [i for i in service.labels.list(viewer.project_id, subject=values["subject"],
                                           reviewer=viewer.name)
            if i["dialogue_id"] == values["dialogue_id"]
            and i["turn_index"] == values["turn_index"]]
    if not values["slot"] and values["label"] == "correct":
        wrong = [i["slot"] for i in mine if i["slot"] and i["label"] == "incorrect"]
        if wrong:
            raise ServiceError(f"you labelled slot {wrong[0]} incorrect; a turn with a wrong "
                               "slot is incorrect (relabel that slot first)", status=409,
                               field="label")
    if values["slot"] and values["label"] == "incorrect":
        turn = next((i for i in mine if not i["slot"]), None)
        if turn is not None and turn["label"] == "correct":
            raise ServiceError("you labelled this turn correct; label it incorrect (or unsure) "
                               "before marking a slot wrong", status=409, field="label")


@router.post("/review/{job_id}/labels", dependencies=[needs("review")])
async def save_label(request: Request, viewer: CurrentViewer, web: WebDep,
                     service: ServiceDep, job_id: str) -> Response:
    body = await json_body(request)

    def save() -> tuple[dict[str, Any], dict[str, int]]:
        row, index = _judge_run(web, service, viewer, job_id)
        values = {**_check_label(body, index), "subject": job_subject(row)}
        _consistent(service, viewer, values)
        saved = service.labels.put(viewer.principal, {**values, "job_id": job_id})
        return saved, label_counts(service.labels.list(viewer.project_id,
                                                       subject=values["subject"]), viewer.name)

    saved, counts = await run_in_threadpool(save)
    return JSONResponse({"saved": {k: saved[k] for k in ("id", "dialogue_id", "turn_index",
                                                          "slot", "label", "note", "reviewer",
                                                          "updated_at")},
                         "counts": counts})


@router.post("/review/{job_id}/sample", dependencies=[needs("review")])
async def draw_sample(request: Request, viewer: CurrentViewer, web: WebDep,
                      service: ServiceDep, job_id: str) -> Response:
    """A reviewer draws the sample queue's sample: the run's estimate sample while none of
    its turns has a label, else a separate sample (``_queues.draw_choice``); then the queue."""
    form = await request.form()

    def drawn() -> tuple[int, int]:
        row, index = _judge_run(web, service, viewer, job_id)  # another project's: 404 first
        n = _form_int(form.get("n"), "n", 1, 5000)
        seed = _form_int(form.get("seed"), "seed", 0, 2 ** 63 - 1)
        web.queues.draw(row, index, n, seed, viewer.principal.token_id)
        return n, seed

    n, seed = await run_in_threadpool(drawn)
    target = f"{PREFIX}/review/{quote(job_id, safe='')}?queue=sample&n={n}&seed={seed}"
    return RedirectResponse(target, status_code=303)


def _form_int(value: Any, field: str, low: int, high: int) -> int:
    """A whole number from a form field, within ``[low, high]`` (422 naming the field)."""
    text = value.strip() if isinstance(value, str) else ""
    if not text.isdecimal() or not low <= int(text) <= high:
        raise ServiceError(f"{field} must be a whole number from {low} to {high}", status=422,
                           field=field)
    return int(text)


@router.get("/review/{job_id}/labels.jsonl")
def export_labels(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                  job_id: str, reviewer: str | None = None) -> Response:
    subject = job_subject(service.jobs.row(viewer.project_id, job_id))
    items = service.labels.list(viewer.project_id, subject=subject, reviewer=reviewer or None)
    predicted: dict[tuple[str, int], Mapping[str, Any]] = {}
    for dialogue_id in sorted({i["dialogue_id"] for i in items if i["slot"]}):
        for row in web.reads.dialogue_rows(viewer.project_id, job_id,
                                                             dialogue_id):
            predicted[(dialogue_id, int(row["turn_index"]))] = row.get("pred_turn_state") or {}
    records = label_records(items, predicted)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return Response(text, media_type="application/x-ndjson",
                    headers=attachment(f"{job_id}-labels.jsonl"))
