"""The review queues behind the review pages: the judge / RULE disagreements, a seeded
random sample (the run's estimate sample, or a separate one once that is fixed) and the ranked
label-error candidates, cached per run and rebuilt when the run's index changes."""

from __future__ import annotations

import random
import threading
import time
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
    replace_sample,
    sample_name,
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
