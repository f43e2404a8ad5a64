"""A run's turns: the paginated list with filters and search, and one turn in full (the
dialogue so far, predicted and gold states of every annotation version, each call's reply,
the filter trace and the verdict) at a stable address that can be shared."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from .._errors import ServiceError
from ..data import STORED_DELETIONS, cumulative_states
from ..service import FINAL, ServiceDep, job_subject, job_warnings
from ._common import WebRoute, render
from ._index import (
    DISAGREE_CHOICES,
    ERROR_CHOICES,
    VERDICT_CHOICES,
    Filters,
    RunIndex,
    TurnEntry,
    _entry,
)
from ._runs import job_label, live_fields
from ._session import CurrentViewer
from ._state import WebDep

router = APIRouter(route_class=WebRoute)
PAGE = 50
JUDGE_RUNS = ("evaluate", "retry-errors")


def _filters(verdict: str, disagree: str, version: str, kind: str, domain: str, slot: str,
             error: str, q: str) -> Filters:
    return Filters(
        verdict=verdict if verdict in VERDICT_CHOICES else "",
        disagree=disagree if disagree in DISAGREE_CHOICES else "",
        version=version[:50], kind=kind[:100], domain=domain[:100], slot=slot[:200],
        error=error if error in ERROR_CHOICES else "", q=q[:300])


@router.get("/runs/{job_id}")
def run_page(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep, job_id: str,
             page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
             verdict: str = "", disagree: str = "", version: str = "", kind: str = "",
             domain: str = "", slot: str = "", error: str = "", q: str = "") -> Response:
    row = service.jobs.row(viewer.project_id, job_id)
    job = service.jobs.get(viewer.project_id, job_id)
    context: dict[str, Any] = {"job": job, "label": job_label(web, viewer, job),
                               "live": live_fields(job), "final": job["status"] in FINAL,
                               "summary": row.summary,
                               "warnings": job_warnings(service.files, viewer.project_id,
                                                        job["kind"], job["inputs"] or {})}
    if job["kind"] not in JUDGE_RUNS:
        return render(request, "job.html", **context)
    filters = _filters(verdict, disagree, version, kind, domain, slot, error, q)
    index = web.index.peek(row)
    summary = row.summary or {}
    versions = list((summary.get("rule") or {}).keys())
    if row.summary is None:
        entries: list[TurnEntry] = []
        total = 0
    elif index is None and not filters.active and web.index.large(row):
        # First paint of a large run: this page's rows by position; the index (which adds
        # the disagreement kinds and serves filters) is built meanwhile.
        offset = (page - 1) * PAGE
        entries = [_entry(seq, r, ()) for seq, r in web.reads.slim_rows(
            viewer.project_id, job_id, start=offset, stop=offset + PAGE)]
        total = int(summary.get("turns") or 0)
        web.index.warm(row)
    else:
        index = index or web.index.ready(row)
        matched = index.match(filters)
        total = len(matched)
        entries = [index.entries[i] for i in matched[(page - 1) * PAGE: page * PAGE]]
        versions = index.versions or versions
    pages = max(1, -(-total // PAGE))
    return render(request, "run.html", **context, entries=entries, total=total, page=page,
                  pages=pages, filters=filters, query=filters.query(), versions=versions,
                  index=index, verdict_choices=VERDICT_CHOICES,
                  disagree_choices=DISAGREE_CHOICES, error_choices=ERROR_CHOICES,
                  page_size=PAGE)


@router.get("/runs/{job_id}/facets")
def facets(request: Request, viewer: CurrentViewer, web: WebDep, service: ServiceDep,
           job_id: str) -> Response:
    """Values the filters offer (domains, slots, disagreement kinds), once the index is built:
    the run page asks for them after it has painted."""
    row = service.jobs.row(viewer.project_id, job_id)
    if row.summary is None:
        return JSONResponse({"domains": [], "slots": [], "kinds": [], "versions": []})
    index = web.index.ready(row)
    return JSONResponse({"domains": list(index.domains), "slots": list(index.slots),
                         "kinds": index.kinds, "versions": index.versions})


def integrate(states: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A cumulative state from a run's stored turn states: the data package's integration,
    with the deletions stored rows hold (``none``, empty, null)."""
    integrated = cumulative_states(states, none_values=STORED_DELETIONS)
    return integrated[-1] if integrated else {}


def turn_view(rows: list[dict[str, Any]], turn_index: int) -> dict[str, Any]:
    """Everything one turn's page shows, from its dialogue's rows."""
    rows = sorted(rows, key=lambda r: int(r.get("turn_index") or 0))
    current = next((r for r in rows if int(r.get("turn_index") or 0) == turn_index), None)
    if current is None:
        raise ServiceError(f"the run has no turn {turn_index} in this dialogue", status=404)
    upto = [r for r in rows if int(r.get("turn_index") or 0) <= turn_index]
    gold_turn = {str(v): dict(s or {}) for v, s in (current.get("gold_turn_state") or {}).items()}
    versions = list(gold_turn)
    pred_turn = dict(current.get("pred_turn_state") or {})
    incorrect = {str(s) for s in current.get("incorrect") or ()}
    missed = {str(s) for s in current.get("missed") or ()}
    slots = list(dict.fromkeys([*pred_turn, *(s for g in gold_turn.values() for s in g),
                                *sorted(incorrect), *sorted(missed)]))
    table = []
    for slot in slots:
        predicted = pred_turn.get(slot)
        gold = {v: gold_turn[v].get(slot) for v in versions}
        table.append({"slot": slot, "predicted": predicted, "gold": gold,
                      "differs": {v: predicted != g for v, g in gold.items()},
                      "judge": "incorrect" if slot in incorrect else
                      "missed" if slot in missed else ""})
    pred_state = integrate([r.get("pred_turn_state") or {} for r in upto])
    gold_state = {v: integrate([(r.get("gold_turn_state") or {}).get(v) or {} for r in upto])
                  for v in versions}
    state_slots = sorted({*pred_state, *(s for g in gold_state.values() for s in g)})
    cumulative = [{"slot": s, "predicted": pred_state.get(s),
                   "gold": {v: gold_state[v].get(s) for v in versions}} for s in state_slots]
    history = []
    for r in upto:
        if r.get("system"):
            history.append({"speaker": "system", "text": str(r["system"]),
                            "turn": int(r.get("turn_index") or 0)})
        history.append({"speaker": "user", "text": str(r.get("user") or ""),
                        "turn": int(r.get("turn_index") or 0)})
    indexes = [int(r.get("turn_index") or 0) for r in rows]
    return {"row": current, "versions": versions, "table": table, "cumulative": cumulative,
            "history": history, "calls": current.get("calls") or [],
            "trace": current.get("trace") or [], "turns_in_dialogue": indexes}


def neighbours(index: RunIndex | None, filters: Filters, dialogue_id: str, turn_index: int,
               indexes: list[int]) -> dict[str, Any]:
    """Previous and next turn: within the filtered list when the index is there, else
    within the dialogue."""
    if index is not None:
        position = index.positions.get((dialogue_id, turn_index))
        matched = index.match(filters) if filters.active else None
        if position is not None:
            order = matched if matched is not None else range(len(index.entries))
            if matched is not None and position not in set(matched):
                return {"prev": None, "next": None, "of": len(matched), "at": None}
            where = matched.index(position) if matched is not None else position
            prev = index.entries[order[where - 1]] if where > 0 else None
            following = index.entries[order[where + 1]] if where + 1 < len(order) else None
            return {"prev": (prev.dialogue_id, prev.turn_index) if prev else None,
                    "next": (following.dialogue_id, following.turn_index) if following
                    else None, "of": len(order), "at": where + 1}
    earlier = [t for t in indexes if t < turn_index]
    later = [t for t in indexes if t > turn_index]
    return {"prev": (dialogue_id, earlier[-1]) if earlier else None,
            "next": (dialogue_id, later[0]) if later else None, "of": None, "at": None}


@router.get("/runs/{job_id}/turns/{dialogue_id:path}/{turn_index}")
def turn_page(request: Request, viewer: CurrentViewer, web: WebDep,
              service: ServiceDep, job_id: str, dialogue_id: str,
              turn_index: int, verdict: str = "", disagree: str = "", version: str = "",
              kind: str = "", domain: str = "", slot: str = "", error: str = "", q: str = ""
              ) -> Response:
    row = service.jobs.row(viewer.project_id, job_id)
    rows = web.reads.dialogue_rows(viewer.project_id, job_id, dialogue_id)
    if not rows:
        raise ServiceError(f"the run has no dialogue {dialogue_id!r}", status=404)
    view = turn_view(rows, turn_index)
    filters = _filters(verdict, disagree, version, kind, domain, slot, error, q)
    index = web.index.peek(row)
    if index is None:
        web.index.warm(row)
    labels = [item for item in service.labels.list(viewer.project_id,
                                                   subject=job_subject(row))
              if item["dialogue_id"] == dialogue_id and item["turn_index"] == turn_index]
    job = service.jobs.get(viewer.project_id, job_id)
    return render(request, "turn.html", job=job, label=job_label(web, viewer, job),
                  view=view, dialogue_id=dialogue_id, turn_index=turn_index,
                  nav=neighbours(index, filters, dialogue_id, turn_index,
                                 view["turns_in_dialogue"]),
                  query=filters.query(), labels=labels)
