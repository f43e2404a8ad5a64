"""The review queues behind the review pages: the judge / RULE disagreements, a seeded
random sample (the run's estimate sample, or a separate one once that is fixed) and the ranked
label-error candidates, cached per run and rebuilt when the run's index changes."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .. import analysis
from .._errors import DSTJudgeError, ServiceError
from ..service import JobRow, JudgmentReads, Service, job_subject, predictions_sha256
from ._agreement import (
    AgreementBoard,
    index_rows,
    labelled_turns,
    reference,
    store_sample,
    stored_sample,
)
from ._candidates import run_candidates
from ._common import Preparing, plural
from ._index import RunIndex

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
    """The sample a queue shows, and whether it is the run's estimate sample. ``sample`` is
    None when the one asked for has not been drawn yet (a reviewer draws it with a ``POST``;
    opening a page never does)."""

    sample: Any
    n: int
    seed: int
    estimate: bool
    fixed: bool
    note: str
    since: float | None = None
    """A separate sample: when it was created. Its queue counts as labelled only the labels
    given (or changed) since then, so it starts empty (:func:`labels_since`)."""

    @property
    def missing(self) -> bool:
        return self.sample is None


def _own(sample: Any) -> tuple[int, int]:
    first = sample.turns[0]
    return first.n or len(sample.units()), first.seed


def _checked(sample: Any, mark: tuple[Any, ...], index: RunIndex, digest: str | None,
             checked: set[tuple[Any, ...]] | None) -> None:
    """Draw the stored sample again and refuse it (422) unless it comes out the same;
    ``checked`` remembers the marks (file id, run index, digest) already checked."""
    if checked is not None and mark in checked:
        return
    try:
        analysis.check_sample(sample, index_rows(index), predictions_sha256=digest)
    except DSTJudgeError as exc:
        raise ServiceError(str(exc), status=422, field="sample") from None
    if checked is not None:
        if len(checked) > 256:
            checked.clear()
        checked.add(mark)


def _is_fixed(service: Service, row: JobRow, sample: Any) -> bool:
    """Whether a turn of the sample has a label (any reviewer, turn or slot)."""
    labelled = labelled_turns(service.labels.list(row.project_id, subject=job_subject(row)))
    return any(t.key in labelled for t in sample.turns)


def _wanted(n: int | None, seed: int | None) -> tuple[int, int]:
    return DEFAULT_SAMPLE if n is None else n, 0 if seed is None else seed


def choose_sample(service: Service, row: JobRow, index: RunIndex, n: int | None,
                  seed: int | None, checked: set[tuple[Any, ...]] | None = None
                  ) -> SampleChoice:
    """The sample a request asks for, read and never written: the run's estimate sample when
    the request names no other (or names its own ``n`` and ``seed``), checked by drawing it
    again (422 when it differs: a tampered store); once that is fixed, the separate draw of
    that ``n`` and ``seed``; else a choice without a sample, saying what drawing it would do
    (:func:`draw_choice`)."""
    digest = predictions_sha256(job_subject(row))
    current_id, current = stored_sample(service, row.project_id, row.id)
    if current is None:
        n, seed = _wanted(n, seed)
        return SampleChoice(None, n, seed, True, False,
                            "no estimate sample is drawn yet; drawing one makes it the run's "
                            "estimate sample (fixed once a turn of it has a label)")
    fixed = _is_fixed(service, row, current)
    own = _own(current)
    wanted = own if n is None and seed is None else _wanted(n, seed)
    if wanted == own:
        _checked(current, (current_id, index.key, digest), index, digest, checked)
        state = "fixed: a turn of it has a label" if fixed else "not fixed until a label"
        return SampleChoice(current, own[0], own[1], True, fixed,
                            f"the run's estimate sample ({state})")
    n, seed = wanted
    if not fixed:
        return SampleChoice(None, n, seed, True, False,
                            f"the run's estimate sample is n {own[0]}, seed {own[1]}, not "
                            "fixed until a label: drawing this one replaces it")
    fixed_note = (f"the run's estimate sample is fixed (n {own[0]}, seed {own[1]}) since its "
                  "first label")
    ref = service.samples.get(row.project_id, row.id, reference(n, seed))
    if ref is None:
        return SampleChoice(None, n, seed, False, True,
                            f"{fixed_note}; drawing this one makes a separate sample, whose "
                            "labels count for agreement, not for the estimates")
    separate_id, separate = stored_sample(service, row.project_id, row.id, n, seed)
    _checked(separate, (separate_id, index.key, digest), index, digest, checked)
    return SampleChoice(separate, n, seed, False, True,
                        f"a separate sample: {fixed_note}; this one started empty (labels "
                        "given before it was drawn are not shown as its own), and its labels "
                        "count for agreement, not for the estimates",
                        since=float(ref["created_at"]))


def draw_choice(service: Service, row: JobRow, index: RunIndex, n: int, seed: int,
                drawn: Callable[[int, int], Any], token_id: str | None = None) -> None:
    """A reviewer's explicit draw (the review page's ``POST``): ``drawn(n, seed)`` becomes
    the run's estimate sample while none of the current one's turns has a label (or there is
    none), and is stored as a separate sample once one has. Drawing what is stored already
    changes nothing."""
    _, current = stored_sample(service, row.project_id, row.id)
    if current is not None and _own(current) == (n, seed):
        return
    if current is None or not _is_fixed(service, row, current):
        store_sample(service, row.project_id, row.id, drawn(n, seed), token_id=token_id)
    elif service.samples.get(row.project_id, row.id, reference(n, seed)) is None:
        store_sample(service, row.project_id, row.id, drawn(n, seed), n, seed,
                     token_id=token_id)


def candidate_queue(service: Service, row: JobRow, index: RunIndex) -> list[QueueItem]:
    """Turns of ranked label-error candidates (judge.analysis.find_candidates)."""
    known = {(e.dialogue_id, e.turn_index) for e in index.entries}
    items: dict[tuple[str, int], str] = {}
    for candidate in run_candidates(service, row).found:
        key = (str(candidate.dialogue_id), int(candidate.turn_index))
        if key in known and key not in items:
            items[key] = (f"candidate #{len(items) + 1}: {candidate.slot} — gold "
                          f"{candidate.gold_value!r}, systems say {candidate.predicted!r} "
                          f"(score {candidate.score:.2f})")
    return [(d, t, why) for (d, t), why in items.items()]


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
                future = self.executor.submit(candidate_queue, self.service, row, index)
                self.ranking[key] = future
        if not future.done():
            raise Preparing(f"the label-error candidates of run {row.id}")
        with self.lock:
            self.ranking.pop(key, None)
        return future.result()  # a failure is raised once, then tried again on reload

    def drawn(self, row: JobRow, index: RunIndex, n: int, seed: int) -> Any:
        """The seeded draw of ``n`` and ``seed`` from the run (the same on every replica),
        kept for a while: a reviewer's draw and its check read it twice."""
        key = (row.id, index.key, "draw", n, seed)
        with self.lock:
            found = self.draws.get(key)
        if found is None:
            found = draw(index, n, seed, predictions_sha256(job_subject(row)))
            with self.lock:
                if len(self.draws) > 32:
                    self.draws.clear()
                self.draws[key] = found
        return found

    def sample(self, row: JobRow, index: RunIndex, n: int | None,
               seed: int | None) -> SampleChoice:
        """The sample queue's sample (:func:`choose_sample`), decided on every request: which
        sample is the estimate sample depends on the labels, which change."""
        return choose_sample(self.service, row, index, n, seed, self.checked)

    def draw(self, row: JobRow, index: RunIndex, n: int, seed: int,
             token_id: str | None = None) -> None:
        """A reviewer's draw (:func:`draw_choice`)."""
        draw_choice(self.service, row, index, n, seed,
                    lambda n, seed: self.drawn(row, index, n, seed), token_id)

    def get(self, row: JobRow, index: RunIndex, kind: str, n: int | None = None,
            seed: int | None = None) -> tuple[list[QueueItem], SampleChoice | None]:
        if kind == "sample":
            choice = self.sample(row, index, n, seed)
            if choice.missing:
                return [], choice
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
