"""The candidates queue: a judge run's label-error candidates (``judge.analysis``'s
``find_candidates`` over the run, in ``review_order``), one at a time, decided with a key:
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
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from .. import analysis
from .._errors import DSTJudgeError, ServiceError
from ..data import dialogue_key, load_dialogues, load_schema
from ..pipeline import Run
from ..service import (
    JobRow,
    Service,
    ServiceDep,
    attachment,
    candidate_id,
    corrections_records,
    may_adjudicate,
    outcomes,
    progress,
    reviewer_agreement,
)
from ._common import PREFIX, Preparing, WebRoute, render
from ._runs import job_label
from ._session import CurrentViewer, Viewer, needs

router = APIRouter(route_class=WebRoute)
MAX_VALUE = 500


@dataclass
class CandidateView:
    """What the queue shows of one candidate."""

    id: str
    rank: int
    dialogue_id: str
    turn_index: int
    slot: str
    gold: str
    annotated: str | None
    suggested: str | None
    score: float
    systems: dict[str, str | None]
    judge: list[str]
    evidence: list[str]
    other_versions: dict[str, str | None]
    context: list[dict[str, Any]]
    later: list[dict[str, Any]] = field(default_factory=list)


def _source_row(service: Service, row: JobRow) -> JobRow:
    """The evaluate job a retry chain started from (its inputs name the data files)."""
    seen = 0
    while row.kind == "retry-errors" and seen < 1000:
        run = (row.inputs or {}).get("run")
        if not isinstance(run, str):
            break
        row = service.jobs.row(row.project_id, run)
        seen += 1
    return row


def _judge_view(turn: Any, slot: str) -> list[str]:
    if turn is None:
        return ["no judgment of this turn"]
    said = [f"turn verdict: {'correct' if turn.verdict else 'incorrect'}"
            if turn.verdict is not None else "no turn verdict"]
    if turn.correct is not None and slot in turn.correct:
        said.append(f"holds {slot} = {turn.correct[slot]!r}")
    if slot in turn.incorrect:
        said.append(f"flags the predicted {slot} as wrong")
    if slot in turn.missed:
        value = turn.missed[slot]
        said.append(f"says {slot} is missing" + (f" ({value!r})" if value is not None else ""))
    if slot in turn.reasons:
        said.append(turn.reasons[slot])
    return said


def rank_candidates(service: Service, row: JobRow) -> list[CandidateView]:
    """The run's candidates in review order, with what the queue shows of each."""
    source_row = _source_row(service, row)
    inputs = source_row.inputs or {}
    if not isinstance(inputs.get("dialogues"), str):
        raise ServiceError("this run's dialogues file is not on the server (an imported "
                           "bundle); candidates need it", status=409)

    def local(file_id: str) -> Path:
        return service.files.local_path(service.files.get(row.project_id, file_id)["sha256"])

    schema = load_schema(local(inputs["schema"])) if isinstance(inputs.get("schema"), str) \
        else None
    rows = list(service.jobs.judgments(row.project_id, row.id))
    dialogues = load_dialogues(local(inputs["dialogues"]), schema=schema).subset(
        list(dict.fromkeys(str(r["dialogue_id"]) for r in rows)))
    source = analysis.source_from_run(Run(Path(row.id), dict(row.summary or {}), rows))
    found = analysis.find_candidates(dialogues, [source], schema=schema)
    ordered = analysis.review_order(found, dialogues, [source])
    gold = dialogues.resolve_version(None)
    views = []
    for candidate in ordered:
        dialogue = dialogues.get(candidate.dialogue_id)
        if dialogue is None:
            continue
        span = analysis.fix_span(candidate, dialogues, gold)
        key = dialogue_key(candidate.dialogue_id)
        judged = (source.judged or {}).get((key, candidate.turn_index))
        views.append(CandidateView(
            candidate_id(candidate.dialogue_id, candidate.turn_index, candidate.slot),
            candidate.rank, candidate.dialogue_id, candidate.turn_index, candidate.slot,
            candidate.gold_version, candidate.gold_value, candidate.predicted,
            candidate.score, dict(candidate.predictions), _judge_view(judged, candidate.slot),
            [e.detail for e in candidate.evidence], dict(candidate.other_versions),
            [{"turn_index": t.turn_index, "system": t.system, "user": t.user}
             for t in dialogue.turns[:candidate.turn_index + 1]],
            [{"turn_index": t.turn_index, "user": t.user}
             for t in dialogue.turns[span.start + 1:span.stop]]))
    return views


class CandidateQueues:
    """Candidates per run, ranked once in a background thread (pages say so meanwhile)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.ready: dict[str, list[CandidateView]] = {}
        self.ranking: dict[str, Future[list[CandidateView]]] = {}
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="web-corrections")

    def get(self, row: JobRow) -> list[CandidateView]:
        with self.lock:
            found = self.ready.get(row.id)
            if found is not None:
                return found
            future = self.ranking.get(row.id)
            if future is None:
                future = self.ranking[row.id] = self.executor.submit(
                    self._rank, row)
        if not future.done():
            raise Preparing(f"the label-error candidates of run {row.id}")
        with self.lock:
            self.ranking.pop(row.id, None)
        views = future.result()  # a failure is raised once, then tried again on reload
        with self.lock:
            if len(self.ready) > 16:
                self.ready.clear()
            self.ready[row.id] = views
        return views

    def _rank(self, row: JobRow) -> list[CandidateView]:
        try:
            return rank_candidates(self.service, row)
        except ServiceError:
            raise
        except DSTJudgeError as exc:
            raise ServiceError(f"could not rank candidates: {exc}", status=409) from None

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _run(request: Request, service: Service, viewer: Viewer, job_id: str) -> JobRow:
    row = service.jobs.row(viewer.project_id, job_id)  # 404 for another project's
    if row.kind not in ("evaluate", "retry-errors") or row.summary is None:
        raise ServiceError("only finished judge runs have a candidates queue", status=409)
    return row


def _queues(request: Request) -> CandidateQueues:
    queues: CandidateQueues = request.app.state.web.corrections
    return queues


def _base(job_id: str) -> str:
    return f"{PREFIX}/corrections/{job_id}"


def _first_open(views: list[CandidateView], decided: set[str]) -> int:
    for position, view in enumerate(views):
        if view.id not in decided:
            return position
    return max(0, len(views) - 1)


@router.get("/corrections/{job_id}")
def corrections_page(request: Request, viewer: CurrentViewer, service: ServiceDep,
                     job_id: str, pos: Annotated[int | None, Query(ge=0)] = None,
                     saved: str | None = None) -> Response:
    row = _run(request, service, viewer, job_id)
    views = _queues(request).get(row)
    decisions = service.decisions.list(viewer.project_id, job_id)
    mine = {d["candidate"]: d for d in decisions
            if d["reviewer"] == viewer.name and not d["adjudicated"]}
    start = pos if pos is not None else _first_open(views, set(mine))
    start = max(0, min(start, len(views) - 1)) if views else 0
    view = views[start] if views else None
    found = outcomes(decisions)
    job = service.jobs.get(viewer.project_id, job_id)
    return render(request, "corrections.html", job=job, label=job_label(request, viewer, job),
                  view=view, pos=start, size=len(views), mine=mine.get(view.id) if view else None,
                  reviews=len(found[view.id]["reviews"]) if view and view.id in found else 0,
                  progress=progress(decisions, len(views)),
                  agreement=reviewer_agreement(decisions),
                  can_review=viewer.can("review"), can_adjudicate=may_adjudicate(
                      viewer.principal), saved=saved == "1", base=_base(job_id))


@router.get("/corrections/{job_id}/disputes")
def disputes_page(request: Request, viewer: CurrentViewer, service: ServiceDep,
                  job_id: str) -> Response:
    row = _run(request, service, viewer, job_id)
    views = {v.id: v for v in _queues(request).get(row)}
    decisions = service.decisions.list(viewer.project_id, job_id)
    found = outcomes(decisions)
    items: list[dict[str, Any]] = [{"view": views[c], "entry": e} for c, e in found.items()
             if c in views and e["state"] in ("disputed", "adjudicated")]
    items.sort(key=lambda i: (i["entry"]["state"] != "disputed", i["view"].rank))
    job = service.jobs.get(viewer.project_id, job_id)
    return render(request, "corrections_disputes.html", job=job,
                  label=job_label(request, viewer, job), items=items,
                  can_adjudicate=may_adjudicate(viewer.principal),
                  progress=progress(decisions, len(views)), base=_base(job_id))


@router.get("/corrections/{job_id}/corrections.jsonl")
def download_corrections(request: Request, viewer: CurrentViewer, service: ServiceDep,
                         job_id: str) -> Response:
    _run(request, service, viewer, job_id)
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
async def save_decision(request: Request, viewer: CurrentViewer, service: ServiceDep,
                        job_id: str) -> Response:
    """A reviewer's decision (or, with ``adjudicate=1``, an adjudication) from the queue's
    form; back to the queue at the next candidate, or to the adjudication view."""
    row = await run_in_threadpool(_run, request, service, viewer, job_id)
    form = await request.form()
    views = await run_in_threadpool(_queues(request).get, row)
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
        {"pos": min(position + 1, len(views) - 1), "saved": 1}), status_code=303)
