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
  labels-only and prediction-powered TSA estimates). The sample is kept in the project's file
  store, so every replica sees it, and it is fixed once a turn of it has a label: another
  ``n`` or ``seed`` then draws a separate sample (see ``_agreement``), whose labels count for
  agreement but not for the estimates. A separate sample starts empty: its queue shows as
  labelled only the labels given (or changed) after it was created, not the turns labelled
  under the estimate sample (a label stays one reviewer's verdict on a turn, wherever given).
  The disagreement queue stays for finding errors; its labels never make an estimate.

A label is one ``PUT`` into the service's label store (reviewer = the token's name, with the
time); the page's script sends it and swaps in the next turn, which it has fetched already.
Labels belong to the run's predictions (the store's *subject*), not to the run: every judge
run on the same predictions file shows and counts the same labels.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from .. import analysis
from .._errors import DSTJudgeError, ServiceError
from ..data import load_dialogues, load_schema
from ..pipeline import Run
from ..service import (
    JobRow,
    JobStatus,
    JudgmentReads,
    Service,
    ServiceDep,
    attachment,
    job_subject,
    predictions_sha256,
)
from ._agreement import (
    AgreementBoard,
    index_rows,
    label_counts,
    labelled_turns,
    labels_since,
    replace_sample,
    sample_name,
    store_sample,
    stored_sample,
)
from ._common import Preparing, WebRoute, plural, render
from ._detail import turn_view
from ._index import RunIndex
from ._labelfile import label_records
from ._runs import job_label
from ._session import CurrentViewer, Viewer, needs

router = APIRouter(route_class=WebRoute)
QUEUES = {"disagreements": "judge / RULE disagreements",
          "sample": "random sample (for agreement and estimates)",
          "candidates": "label-error candidates, ranked by evidence"}
LABELS = ("correct", "incorrect", "unsure")
DEFAULT_SAMPLE = 100


QueueItem = tuple[str, int, str]
"""(dialogue id, turn index, why it is in the queue)."""


def disagreement_queue(index: RunIndex) -> list[QueueItem]:
    ranked = []
    for e in index.entries:
        if e.verdict is None:
            continue
        against = [v for v, ok in e.rule if ok is not None and ok != e.verdict]
        if not against:
            continue
        direction = "judge accepts" if e.verdict else "judge rejects"
        other = "rejects" if e.verdict else "accepts"
        why = f"{direction}; RULE-{', RULE-'.join(against)} {other}"
        ranked.append(((0 if e.verdict else 1, -len(against), e.seq),
                       (e.dialogue_id, e.turn_index, why)))
    return [item for _, item in sorted(ranked)]


def draw(index: RunIndex, n: int, seed: int, predictions: str | None = None) -> Any:
    """A simple random sample of the run's judged turns (``judge.analysis.draw_sample``, the
    ``random`` design), as ``labels sample`` draws by default; ``predictions`` (the sha256 of
    the predictions file the run judged, when known) is recorded with it."""
    try:
        return analysis.draw_sample(index_rows(index), n=n, seed=seed, design="random",
                                    predictions_sha256=predictions)
    except DSTJudgeError as exc:
        raise ServiceError(str(exc), status=422, field="n") from None


def sample_queue(sample: Any, seed: int) -> list[QueueItem]:
    """The sample's turns in a seeded random order (strata mixed, so a reviewer cannot tell
    a turn's stratum from its place in the queue)."""
    items = [(t.dialogue_id, t.turn_index, f"sample: {t.stratum} (weight {t.weight:.1f}: "
              f"{t.stratum_sample} of {plural(t.stratum_size, 'turn')})") for t in sample.turns]
    random.Random(seed).shuffle(items)
    return items


@dataclass
class SampleChoice:
    """The sample a queue shows, and whether it is the run's estimate sample."""

    sample: Any
    n: int
    seed: int
    estimate: bool
    fixed: bool
    note: str
    since: float | None = None
    """A separate sample: when it was created. Its queue counts as labelled only the labels
    given (or changed) since then, so it starts empty (:func:`labels_since`)."""


def choose_sample(service: Service, row: JobRow, index: RunIndex, n: int | None,
                  seed: int | None, drawn: Callable[[int, int], Any],
                  checked: set[tuple[Any, ...]] | None = None) -> SampleChoice:
    """The run's estimate sample when the request names no other (or names its own ``n`` and
    ``seed``), checked by drawing it again (422 when it differs: a tampered store); else the
    draw ``drawn(n, seed)``, which replaces the estimate sample while none of its turns has a
    label, and is stored as a separate sample once one has. ``checked`` remembers the stored
    files (by id, and the run's index) already drawn again, so a queue's every request does
    not redraw it."""
    digest = predictions_sha256(job_subject(row))
    current_id, current = stored_sample(service, row.project_id, row.id)
    fixed = False
    if current is not None:
        labelled = labelled_turns(service.labels.list(row.project_id,
                                                      subject=job_subject(row)))
        fixed = any(t.key in labelled for t in current.turns)
        first = current.turns[0]
        own = (first.n or len(current.units()), first.seed)
        wanted = own if n is None and seed is None else (
            DEFAULT_SAMPLE if n is None else n, 0 if seed is None else seed)
        if wanted == own:
            mark = (current_id, index.key, digest)
            if checked is None or mark not in checked:
                try:
                    analysis.check_sample(current, index_rows(index), predictions_sha256=digest)
                except DSTJudgeError as exc:
                    raise ServiceError(str(exc), status=422, field="sample") from None
                if checked is not None:
                    if len(checked) > 256:
                        checked.clear()
                    checked.add(mark)
            state = "fixed: a turn of it has a label" if fixed else "not fixed until a label"
            return SampleChoice(current, own[0], own[1], True, fixed,
                                f"the run's estimate sample ({state})")
    n = DEFAULT_SAMPLE if n is None else n
    seed = 0 if seed is None else seed
    sample = drawn(n, seed)
    if not fixed:
        replace_sample(service, row.project_id, row.id, sample)
        return SampleChoice(sample, n, seed, True, False,
                            "the run's estimate sample (not fixed until a label)")
    created = store_sample(service, row.project_id, row.id, sample,
                           name=sample_name(row.id, n, seed))
    first = current.turns[0]
    return SampleChoice(sample, n, seed, False, True,
                        f"a separate sample: the run's estimate sample is fixed (n "
                        f"{first.n or len(current.units())}, seed {first.seed}) since its "
                        "first label; this one started empty (labels given before it was "
                        "drawn are not shown as its own), and its labels count for agreement, "
                        "not for the estimates", since=time.time() if created is None
                        else created)


def candidate_queue(service: Service, row: JobRow, index: RunIndex) -> list[QueueItem]:
    """Turns of ranked label-error candidates (judge.analysis.find_candidates)."""
    inputs = row.inputs or {}
    if not isinstance(inputs.get("dialogues"), str):
        raise ServiceError("this run's dialogues file is not on the server (an imported "
                           "bundle); candidates need it", status=409)

    def local(file_id: str) -> Path:
        return service.files.local_path(service.files.get(row.project_id, file_id)["sha256"])

    dialogues = load_dialogues(local(inputs["dialogues"]))
    schema = load_schema(local(inputs["schema"])) if isinstance(inputs.get("schema"), str) \
        else None
    rows = list(service.jobs.judgments(row.project_id, row.id))
    source = analysis.source_from_run(Run(Path(row.id), dict(row.summary or {}), rows))
    found = analysis.find_candidates(dialogues.subset(list(dict.fromkeys(
        r["dialogue_id"] for r in rows))), [source], schema=schema)
    known = {(e.dialogue_id, e.turn_index) for e in index.entries}
    items: dict[tuple[str, int], str] = {}
    for candidate in found:
        key = (str(candidate.dialogue_id), int(candidate.turn_index))
        if key in known and key not in items:
            items[key] = (f"candidate #{len(items) + 1}: {candidate.slot} — gold "
                          f"{candidate.gold_value!r}, systems say {candidate.predicted!r} "
                          f"(score {candidate.score:.2f})")
    return [(d, t, why) for (d, t), why in items.items()]


def _ranked(service: Service, row: JobRow, index: RunIndex) -> list[QueueItem]:
    try:
        return candidate_queue(service, row, index)
    except ServiceError:
        raise
    except DSTJudgeError as exc:
        raise ServiceError(f"could not rank candidates: {exc}", status=409) from None


class Queues:
    """Queues per job, kind and parameters, rebuilt when the run's index changes. The
    candidates queue (loading the dialogues and ranking every slot) is built in a background
    thread; pages say so meanwhile (:class:`Preparing`)."""

    def __init__(self, service: Service, reads: JudgmentReads, board: AgreementBoard) -> None:
        self.service = service
        self.reads = reads
        self.board = board
        self.items: dict[tuple[Any, ...], list[QueueItem]] = {}
        self.draws: dict[tuple[Any, ...], Any] = {}
        self.checked: set[tuple[Any, ...]] = set()
        self.ranking: dict[tuple[Any, ...], Future[list[QueueItem]]] = {}
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="web-candidates")

    def _candidates(self, key: tuple[Any, ...], row: JobRow, index: RunIndex) -> list[QueueItem]:
        with self.lock:
            future = self.ranking.get(key)
            if future is None:
                future = self.executor.submit(_ranked, self.service, row, index)
                self.ranking[key] = future
        if not future.done():
            raise Preparing(f"the label-error candidates of run {row.id}")
        with self.lock:
            self.ranking.pop(key, None)
        return future.result()  # a failure is raised once, then tried again on reload

    def sample(self, row: JobRow, index: RunIndex, n: int | None,
               seed: int | None) -> SampleChoice:
        """The sample queue's sample (:func:`choose_sample`), decided on every request: which
        sample is the estimate sample depends on the labels, which change."""
        def drawn(n: int, seed: int) -> Any:
            key = (row.id, index.key, "draw", n, seed)
            with self.lock:
                found = self.draws.get(key)
            if found is None:  # seeded: the same on every replica
                found = draw(index, n, seed, predictions_sha256(job_subject(row)))
                with self.lock:
                    if len(self.draws) > 32:
                        self.draws.clear()
                    self.draws[key] = found
            return found

        return choose_sample(self.service, row, index, n, seed, drawn, self.checked)

    def get(self, row: JobRow, index: RunIndex, kind: str, n: int | None = None,
            seed: int | None = None) -> tuple[list[QueueItem], SampleChoice | None]:
        if kind == "sample":
            choice = self.sample(row, index, n, seed)
            return sample_queue(choice.sample, choice.seed), choice
        key = (row.id, index.key, kind, 0, 0)
        found = self.items.get(key)
        if found is None:
            if kind == "candidates":
                found = self._candidates(key, row, index)
            else:
                found = disagreement_queue(index)
            if len(self.items) > 32:
                self.items.clear()
            self.items[key] = found
        return found, None

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def _queue(queue: str) -> str:
    return queue if queue in QUEUES else "disagreements"


def _params(queue: str, choice: SampleChoice | None) -> dict[str, Any]:
    params: dict[str, Any] = {"queue": _queue(queue)}
    if choice is not None:
        params.update(n=choice.n, seed=choice.seed)
    return params


def _judge_run(request: Request,
               service: Service, viewer: Viewer, job_id: str) -> tuple[Any, RunIndex]:
    row = service.jobs.row(viewer.project_id, job_id)
    if row.kind not in ("evaluate", "retry-errors") or row.summary is None:
        raise ServiceError("only finished judge runs can be reviewed", status=409)
    return row, request.app.state.web.index.ready(row)


def _mine(service: Service, viewer: Viewer, row: JobRow,
          choice: SampleChoice | None) -> list[Mapping[str, Any]]:
    """This reviewer's labels of the run, as the queue counts them: a separate sample's
    queue only those given since it was created."""
    labels = service.labels.list(viewer.project_id, subject=job_subject(row),
                                 reviewer=viewer.name)
    return labels_since(labels, None if choice is None else choice.since)


def _item_context(request: Request, service: Service, viewer: Viewer, row: JobRow, index: RunIndex,
                  queue: list[QueueItem], pos: int, params: dict[str, Any],
                  choice: SampleChoice | None = None) -> dict[str, Any]:
    if not queue:
        return {"item": None, "pos": 0, "size": 0, "params": params, "job_id": row.id}
    pos = max(0, min(pos, len(queue) - 1))
    dialogue_id, turn_index, why = queue[pos]
    rows = request.app.state.web.reads.dialogue_rows(viewer.project_id, row.id, dialogue_id)
    view = turn_view(rows, turn_index)
    mine = {item["slot"]: item for item in _mine(service, viewer, row, choice)
            if item["dialogue_id"] == dialogue_id and item["turn_index"] == turn_index}
    return {"item": {"dialogue_id": dialogue_id, "turn_index": turn_index, "why": why},
            "view": view, "mine": mine, "pos": pos, "size": len(queue), "params": params,
            "job_id": row.id, "can_label": viewer.can("review")}


def _first_open(request: Request, service: Service, viewer: Viewer, row: JobRow,
                queue: list[QueueItem], choice: SampleChoice | None = None) -> int:
    """The first queue position this reviewer has not labelled (at the turn level)."""
    done = {(i["dialogue_id"], i["turn_index"]) for i in _mine(service, viewer, row, choice)
            if not i["slot"]}
    for position, (dialogue_id, turn_index, _) in enumerate(queue):
        if (dialogue_id, turn_index) not in done:
            return position
    return max(0, len(queue) - 1)


@router.get("/review")
def review_index(request: Request, viewer: CurrentViewer, service: ServiceDep) -> Response:
    runs = [j for j in service.jobs.list(viewer.project_id, status=JobStatus.SUCCEEDED, limit=200)
            if j["kind"] in ("evaluate", "retry-errors")]
    counts: dict[str, dict[str, int]] = {}
    for item in service.labels.list(viewer.project_id):
        entry = counts.setdefault(str(item["subject"]), {"labels": 0, "mine": 0})
        entry["labels"] += 1
        entry["mine"] += item["reviewer"] == viewer.name
    items = [{"job": j, "label": job_label(request, viewer, j),
              "counts": counts.get(service.labels.subject_of_job(viewer.project_id, j["id"]),
                                   {"labels": 0, "mine": 0})} for j in runs]
    return render(request, "review_index.html", items=items, queues=QUEUES,
                  default_sample=DEFAULT_SAMPLE)


@router.get("/review/{job_id}")
def review_page(request: Request, viewer: CurrentViewer, service: ServiceDep, job_id: str,
                queue: str = "disagreements",
                n: Annotated[int | None, Query(ge=1, le=5000)] = None, seed: int | None = None,
                pos: Annotated[int | None, Query(ge=0)] = None) -> Response:
    row, index = _judge_run(request, service, viewer, job_id)
    items, choice = request.app.state.web.queues.get(row, index, _queue(queue), n, seed)
    params = _params(queue, choice)
    start = pos if pos is not None else _first_open(request, service, viewer, row, items,
                                                    choice)
    context = _item_context(request, service, viewer, row, index, items, start, params, choice)
    context["sample_note"] = choice.note if choice is not None else None
    job = service.jobs.get(viewer.project_id, job_id)
    panel = request.app.state.web.agreement.panel(viewer.project_id, row, index, viewer.name)
    return render(request, "review.html", **context, job=job,
                  label=job_label(request, viewer, job), queues=QUEUES,
                  panel=panel, labels=LABELS)


@router.get("/review/{job_id}/item")
def review_item(request: Request, viewer: CurrentViewer, service: ServiceDep, job_id: str,
                queue: str = "disagreements",
                n: Annotated[int | None, Query(ge=1, le=5000)] = None, seed: int | None = None,
                pos: Annotated[int, Query(ge=0)] = 0) -> Response:
    row, index = _judge_run(request, service, viewer, job_id)
    items, choice = request.app.state.web.queues.get(row, index, _queue(queue), n, seed)
    params = _params(queue, choice)
    context = _item_context(request, service, viewer, row, index, items, pos, params, choice)
    return render(request, "_review_item.html", **context, labels=LABELS)


@router.get("/review/{job_id}/agreement")
def review_agreement(request: Request, viewer: CurrentViewer,
                     service: ServiceDep, job_id: str) -> Response:
    row, index = _judge_run(request, service, viewer, job_id)
    panel = request.app.state.web.agreement.panel(viewer.project_id, row, index, viewer.name)
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
    return {"dialogue_id": dialogue_id, "turn_index": turn_index, "slot": slot,
            "label": label, "note": (note or "").strip() or None}


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
async def save_label(request: Request, viewer: CurrentViewer,
                     service: ServiceDep, job_id: str) -> Response:
    try:
        body = await request.json()
    except ValueError:
        raise ServiceError("expected a JSON body", status=422) from None

    def save() -> tuple[dict[str, Any], dict[str, int]]:
        row, index = _judge_run(request, service, viewer, job_id)
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


@router.get("/review/{job_id}/labels.jsonl")
def export_labels(request: Request, viewer: CurrentViewer, service: ServiceDep, job_id: str,
                  reviewer: str | None = None) -> Response:
    subject = job_subject(service.jobs.row(viewer.project_id, job_id))
    items = service.labels.list(viewer.project_id, subject=subject, reviewer=reviewer or None)
    predicted: dict[tuple[str, int], Mapping[str, Any]] = {}
    for dialogue_id in sorted({i["dialogue_id"] for i in items if i["slot"]}):
        for row in request.app.state.web.reads.dialogue_rows(viewer.project_id, job_id,
                                                             dialogue_id):
            predicted[(dialogue_id, int(row["turn_index"]))] = row.get("pred_turn_state") or {}
    records = label_records(items, predicted)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return Response(text, media_type="application/x-ndjson",
                    headers=attachment(f"{job_id}-labels.jsonl"))
