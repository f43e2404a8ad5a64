"""The label-error candidates a corrections queue shows: ``judge.analysis``'s
``find_candidates`` over a judge run (or, for an audit job of predictions files, the ranking its
worker wrote to ``candidates.jsonl``), in review or evidence order, each with what a reviewer
needs to decide it; ranked once per run and order in a background thread."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import analysis
from .._errors import DSTJudgeError, ServiceError
from ..data import DialogueSet, dialogue_key, load_dialogues, load_schema
from ..service import JobRow, Service
from ._common import Preparing


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


@contextlib.contextmanager
def _ranking_refusals() -> Iterator[None]:
    """Data that cannot be ranked (a version missing, a bad file) is a 409 naming why; the
    service's own refusals (a file or job the project lacks) keep their status."""
    try:
        yield
    except ServiceError:
        raise
    except DSTJudgeError as exc:
        raise ServiceError(f"could not rank candidates: {exc}", status=409) from None


@dataclass(frozen=True)
class RunCandidates:
    """A finished judge run's label-error candidates (``find_candidates``, ranked by score)
    with what they were found in: the dialogues it judged and the run as an audit source."""

    dialogues: DialogueSet
    source: analysis.AuditSource
    found: list[analysis.Candidate]


def run_candidates(service: Service, row: JobRow) -> RunCandidates:
    """The candidates of ``row`` (a retry's over the data of the evaluate job it started from);
    409 for a run whose dialogues are not on the server or that cannot be ranked."""
    inputs = _source_row(service, row).inputs or {}
    if not isinstance(inputs.get("dialogues"), str):
        raise ServiceError("this run's dialogues file is not on the server (an imported "
                           "bundle); candidates need it", status=409)

    def local(file_id: str) -> Path:
        return service.files.local_path(service.files.get(row.project_id, file_id)["sha256"])

    with _ranking_refusals():
        schema = load_schema(local(inputs["schema"])) if isinstance(inputs.get("schema"), str) \
            else None
        run = service.jobs.run(row.project_id, row.id)  # through the job's run store
        dialogues = load_dialogues(local(inputs["dialogues"]), schema=schema).subset(
            list(dict.fromkeys(str(r["dialogue_id"]) for r in run.rows)))
        source = analysis.source_from_run(run)
        found = analysis.find_candidates(dialogues, [source], schema=schema)
    return RunCandidates(dialogues, source, found)


def is_predictions_audit(row: JobRow) -> bool:
    """An audit job of predictions files (no judge run): its queue is the job's
    ``candidates.jsonl``."""
    return row.kind == "audit" and "run" not in (row.inputs or {})


def rank_candidates(service: Service, row: JobRow, order: str = "review"
                    ) -> list[CandidateView]:
    """The candidates of a run (or of an audit of predictions files) in ``order``, with what
    the queue shows of each; one view per candidate id (competing proposals for one slot are
    one question: the first in the order stands for them)."""
    if is_predictions_audit(row):
        views = _audit_views(service, row, order)
    else:
        ran = run_candidates(service, row)
        with _ranking_refusals():
            views = _views(ran, order)
    seen: set[str] = set()
    unique: list[CandidateView] = []
    for view in views:
        if view.id not in seen:
            seen.add(view.id)
            view.rank = len(unique) + 1
            unique.append(view)
    return unique


NO_JUDGE = ["no judge run: an audit of predictions files (exact-match evidence only)"]


def _audit_views(service: Service, row: JobRow, order: str) -> list[CandidateView]:
    """The views of an audit job's ``candidates.jsonl`` (written in review order, each record
    with its place in evidence order)."""
    _, data = service.jobs.artifact(row.project_id, row.id, "candidates.jsonl")
    records = [json.loads(line) for line in data.decode("utf-8").splitlines() if line]
    if order == "evidence":
        records.sort(key=lambda r: int(r["evidence_rank"]))
    return [CandidateView(
        str(r["id"]), position, str(r["dialogue_id"]), int(r["turn_index"]), str(r["slot"]),
        analysis.base_version(str(r["gold_version"])), r["gold_value"], r["predicted"],
        float(r["score"]), dict(r["predictions"]), NO_JUDGE,
        [str(e["detail"]) for e in r["evidence"]], dict(r["other_versions"]),
        list(r["context"]), list(r["later"])) for position, r in enumerate(records, start=1)]


def _views(ran: RunCandidates, order: str = "review") -> list[CandidateView]:
    dialogues, source = ran.dialogues, ran.source
    ordered = analysis.review_order(ran.found, dialogues, [source]) if order == "review" \
        else list(ran.found)
    gold = dialogues.resolve_version(None)
    views: list[CandidateView] = []
    for candidate in ordered:
        dialogue = dialogues.get(candidate.dialogue_id)
        if dialogue is None:
            continue
        span = analysis.fix_span(candidate, dialogues, gold)
        key = dialogue_key(candidate.dialogue_id)
        judged = (source.judged or {}).get((key, candidate.turn_index))
        views.append(CandidateView(
            candidate.id, len(views) + 1, candidate.dialogue_id, candidate.turn_index,
            candidate.slot,
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
        self.ready: dict[tuple[str, str], list[CandidateView]] = {}
        self.ranking: dict[tuple[str, str], Future[list[CandidateView]]] = {}
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="web-corrections")

    def get(self, row: JobRow, order: str = "review") -> list[CandidateView]:
        key = (row.id, order)
        with self.lock:
            found = self.ready.get(key)
            if found is not None:
                return found
            future = self.ranking.get(key)
            if future is None:
                future = self.ranking[key] = self.executor.submit(
                    rank_candidates, self.service, row, order)
        if not future.done():
            raise Preparing(f"the label-error candidates of run {row.id}")
        with self.lock:
            self.ranking.pop(key, None)
        views = future.result()  # a failure is raised once, then tried again on reload
        with self.lock:
            if len(self.ready) > 16:
                self.ready.clear()
            self.ready[key] = views
        return views


    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
