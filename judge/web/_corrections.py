"""The candidates queue: the label-error candidates of a judge run (``judge.analysis``'s
``find_candidates`` over the run) or of an audit job of predictions files (no judge run), in
review order or, at the reviewer's choice, evidence order, one at a time, decided with a key:
accept the suggested value, type another, or reject ("the annotation is right"). Decisions go
to the service's decision store under the token's name with the time; several reviewers may
decide the same candidate, and where they disagree the candidate waits in the adjudication
view for an admin token or the reviewer named ``adjudicator``. The decisions export as a
corrections file (``corrections.jsonl`` here, ``GET /v1/jobs/{id}/corrections`` in the API,
``dst-judge corrections export`` on the command line).

Each candidate shows the dialogue up to its turn, the annotation's value, the systems' and the
judge's view of the slot, the suggested value and the later turns a fix carries to
(``fix_span``: the following turns whose annotation keeps the same value).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from .._errors import ServiceError
from ..analysis.tables import ORDER_TRADEOFF
from ..service import (
    JobRow,
    Service,
    ServiceDep,
    attachment,
    corrections_records,
    may_adjudicate,
    outcomes,
    progress,
    reviewer_agreement,
)
from ._candidates import CandidateView, is_predictions_audit
from ._common import PREFIX, WebRoute, render
from ._runs import job_label
from ._session import CurrentViewer, needs
from ._state import WebDep
from ._viewer import Viewer

router = APIRouter(route_class=WebRoute)
MAX_VALUE = 500


def _run(service: Service, viewer: Viewer, job_id: str) -> JobRow:
    row = service.jobs.row(viewer.project_id, job_id)  # 404 for another project's
    judged = row.kind in ("evaluate", "retry-errors")
    if not (judged or is_predictions_audit(row)) or row.summary is None:
        raise ServiceError("only finished judge runs and audits of predictions files have a "
                           "candidates queue", status=409)
    return row


Order = Literal["review", "evidence"]
"""The queue's order: ``review`` (whole turns first: the most JGA per review) or ``evidence``
(the most likely errors first)."""


def _base(job_id: str) -> str:
    return f"{PREFIX}/corrections/{job_id}"


def _first_open(views: list[CandidateView], decided: set[str]) -> int:
    for position, view in enumerate(views):
        if view.id not in decided:
            return position
    return max(0, len(views) - 1)


@router.get("/corrections/{job_id}")
def corrections_page(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                     job_id: str, pos: Annotated[int | None, Query(ge=0)] = None,
                     saved: str | None = None, order: Order = "review") -> Response:
    row = _run(service, viewer, job_id)
    views = web.corrections.get(row, order)
    decisions = service.decisions.list(viewer.project_id, job_id)
    mine = {d["candidate"]: d for d in decisions
            if d["reviewer"] == viewer.name and not d["adjudicated"]}
    start = pos if pos is not None else _first_open(views, set(mine))
    start = max(0, min(start, len(views) - 1)) if views else 0
    view = views[start] if views else None
    found = outcomes(decisions)
    job = service.jobs.get(viewer.project_id, job_id)
    return render(request, "corrections.html", job=job, label=job_label(web, viewer, job),
                  view=view, pos=start, size=len(views), mine=mine.get(view.id) if view else None,
                  reviews=len(found[view.id]["reviews"]) if view and view.id in found else 0,
                  progress=progress(decisions, len(views)),
                  agreement=reviewer_agreement(decisions),
                  can_review=viewer.can("review"), can_adjudicate=may_adjudicate(
                      viewer.principal), saved=saved == "1", base=_base(job_id), order=order,
                  open_left=sum(v.id not in mine for v in views),
                  order_tradeoff=ORDER_TRADEOFF.sentence(),
                  judged=not is_predictions_audit(row))


@router.get("/corrections/{job_id}/disputes")
def disputes_page(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                  job_id: str) -> Response:
    row = _run(service, viewer, job_id)
    views = {v.id: v for v in web.corrections.get(row)}
    decisions = service.decisions.list(viewer.project_id, job_id)
    found = outcomes(decisions)
    items: list[dict[str, Any]] = [{"view": views[c], "entry": e} for c, e in found.items()
             if c in views and e["state"] in ("disputed", "adjudicated")]
    items.sort(key=lambda i: (i["entry"]["state"] != "disputed", i["view"].rank))
    job = service.jobs.get(viewer.project_id, job_id)
    return render(request, "corrections_disputes.html", job=job,
                  label=job_label(web, viewer, job), items=items,
                  can_adjudicate=may_adjudicate(viewer.principal),
                  progress=progress(decisions, len(views)), base=_base(job_id))


@router.get("/corrections/{job_id}/corrections.jsonl")
def download_corrections(request: Request, viewer: CurrentViewer, service: ServiceDep,
                         job_id: str) -> Response:
    _run(service, viewer, job_id)
    records = corrections_records(service.decisions.list(viewer.project_id, job_id))
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return Response(body, media_type="application/x-ndjson",
                    headers=attachment(f"corrections-{job_id}.jsonl"))


def _decision(form: Any, view: CandidateView) -> dict[str, Any]:
    action = form.get("action")
    note = form.get("note") or None
    if note is not None and (not isinstance(note, str) or len(note) > 5000):
        raise ServiceError("note must be text of at most 5000 characters", status=422,
                           field="note")
    if action == "accept":
        value = view.suggested
    elif action == "reject":
        value = view.annotated
    elif action == "edit":
        typed = form.get("value")
        if not isinstance(typed, str) or len(typed) > MAX_VALUE:
            raise ServiceError(f"type a value of at most {MAX_VALUE} characters (empty: the "
                               "slot holds no value)", status=422, field="value")
        value = typed.strip() or None
    else:
        raise ServiceError("action must be accept, edit or reject", status=422, field="action")
    return {"candidate": view.id, "dialogue_id": view.dialogue_id,
            "turn_index": view.turn_index, "slot": view.slot, "gold": view.gold,
            "action": action, "value": value, "was": view.annotated,
            "note": note.strip() if isinstance(note, str) and note.strip() else None}


@router.post("/corrections/{job_id}/decisions", dependencies=[needs("review")])
async def save_decision(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
                        job_id: str) -> Response:
    """A reviewer's decision (or, with ``adjudicate=1``, an adjudication) from the queue's
    form; back to the queue at the next candidate, or to the adjudication view."""
    row = await run_in_threadpool(_run, service, viewer, job_id)
    form = await request.form()
    order = "evidence" if form.get("order") == "evidence" else "review"
    views = await run_in_threadpool(web.corrections.get, row, order)
    wanted = form.get("candidate")
    view = next((v for v in views if v.id == wanted), None)
    if view is None:
        raise ServiceError("this run has no such candidate", status=404, field="candidate")
    values = _decision(form, view)
    adjudicate = form.get("adjudicate") == "1"
    await run_in_threadpool(service.decisions.put, viewer.principal, job_id, values,
                            adjudicated=adjudicate)
    if adjudicate:
        return RedirectResponse(_base(job_id) + "/disputes", status_code=303)
    position = next(i for i, v in enumerate(views) if v.id == view.id)
    return RedirectResponse(_base(job_id) + "?" + urlencode(
        {"pos": min(position + 1, len(views) - 1), "saved": 1, "order": order}),
        status_code=303)
