"""A compact index of a run's turns, so that filters, search, the review queue and the
per-slot and per-domain breakdowns do not re-read every judgment row on every request.

A full-test-set run holds 7,368 rows of a few kilobytes each (replies, traces, states); the
index keeps a few hundred bytes per turn: ids, verdicts, the slots and domains the turn
touches, the audit's disagreement kinds, and lower-cased text for search. It is built once per
job (read in batches, one dialogue at a time, so memory stays flat), in a background thread
when a run page is first opened, and kept for the few most recently used jobs. A finished
job's rows never change; a running job has none yet, so the index is keyed by the job's
``updated_at`` and rebuilt when that moves.

Rows are read without their calls and traces (the service's ``JudgmentReads.slim_rows``). An
unfiltered page of a large run does not wait for the index: it reads its 50 rows by position,
which is what keeps first paint fast; a page that needs the index of a large run says it is
being prepared and reloads itself (``IndexCache.ready``).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..analysis import audit_items
from ..service import JobRow, JudgmentReads
from ._common import Preparing

DISAGREE_CHOICES = {
    "": "any",
    "agree": "judge and RULE agree",
    "any": "judge and RULE disagree",
    "judge-accepts": "judge accepts, RULE rejects",
    "judge-rejects": "judge rejects, RULE accepts",
}
VERDICT_CHOICES = {"": "any", "correct": "correct", "incorrect": "incorrect",
                   "none": "no verdict (error)"}
ERROR_CHOICES = {"": "any", "yes": "with an error", "no": "without error"}
SNIPPET = 160
SYNC_INDEX = 2000
"""Runs up to this many turns get their index within the request (a few tenths of a
second); larger ones are indexed in the background while the page says so."""


def domain_of(slot: str) -> str:
    return slot.split("-", 1)[0] if "-" in slot else slot


def _alternatives(value: str) -> list[str]:
    return value.split("|") if "|" in value else [value]


def _same(predicted: Any, gold: Any) -> bool:
    if predicted is None or gold is None:
        return predicted is gold
    return predicted == gold or str(predicted) in _alternatives(str(gold))


@dataclass(frozen=True)
class TurnEntry:
    seq: int
    dialogue_id: str
    turn_index: int
    verdict: bool | None
    rule: tuple[tuple[str, bool | None], ...]
    error: str | None
    user: str
    text: str
    slots: tuple[str, ...]
    domains: tuple[str, ...]
    kinds: tuple[str, ...]
    flagged: tuple[str, ...]

    @property
    def rule_map(self) -> dict[str, bool | None]:
        return dict(self.rule)

    def disagrees(self, version: str | None) -> tuple[bool, bool]:
        """(judge accepts where RULE rejects, judge rejects where RULE accepts) for one
        version or any version."""
        if self.verdict is None:
            return False, False
        values = [ok for v, ok in self.rule if ok is not None and (not version or v == version)]
        accepts = self.verdict and any(ok is False for ok in values)
        rejects = (not self.verdict) and any(ok is True for ok in values)
        return bool(accepts), bool(rejects)


@dataclass
class SlotFigures:
    involved: int = 0
    flagged: int = 0
    mismatch: dict[str, int] = field(default_factory=dict)


@dataclass
class DomainFigures:
    turns: int = 0
    judged: int = 0
    judge_ok: int = 0
    rule_ok: dict[str, int] = field(default_factory=dict)
    rule_turns: dict[str, int] = field(default_factory=dict)


@dataclass
class Filters:
    verdict: str = ""
    disagree: str = ""
    version: str = ""
    kind: str = ""
    domain: str = ""
    slot: str = ""
    error: str = ""
    q: str = ""

    @property
    def active(self) -> bool:
        return any(vars(self).values())

    def query(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}


@dataclass
class RunIndex:
    job_id: str
    key: Any
    versions: list[str]
    entries: list[TurnEntry]
    slots: dict[str, SlotFigures]
    domains: dict[str, DomainFigures]
    kinds: list[str]
    positions: dict[tuple[str, int], int]

    def match(self, f: Filters) -> list[int]:
        """Positions of the entries that pass every filter, in run order."""
        needle = f.q.strip().lower()
        out = []
        for position, e in enumerate(self.entries):
            if f.verdict == "correct" and e.verdict is not True:
                continue
            if f.verdict == "incorrect" and e.verdict is not False:
                continue
            if f.verdict == "none" and e.verdict is not None:
                continue
            if f.error == "yes" and not e.error:
                continue
            if f.error == "no" and e.error:
                continue
            if f.disagree or f.version:
                accepts, rejects = e.disagrees(f.version or None)
                kind = f.disagree or "any"
                if kind == "agree" and (accepts or rejects or e.verdict is None):
                    continue
                if kind == "any" and not (accepts or rejects):
                    continue
                if kind == "judge-accepts" and not accepts:
                    continue
                if kind == "judge-rejects" and not rejects:
                    continue
            if f.kind and f.kind not in e.kinds:
                continue
            if f.domain and f.domain not in e.domains:
                continue
            if f.slot and f.slot not in e.slots:
                continue
            if needle and needle not in e.text:
                continue
            out.append(position)
        return out


def _entry(seq: int, row: dict[str, Any], kinds: Iterable[str]) -> TurnEntry:
    pred = row.get("pred_turn_state") or {}
    gold = row.get("gold_turn_state") or {}
    flagged = [str(s) for s in (*(row.get("incorrect") or ()), *(row.get("missed") or ()))]
    slots = dict.fromkeys([*map(str, pred), *(str(s) for g in gold.values() for s in (g or {})),
                           *flagged])
    rule = tuple((str(v), ok if isinstance(ok, bool) else None)
                 for v, ok in (row.get("rule") or {}).items())
    verdict = row.get("verdict")
    system, user = str(row.get("system") or ""), str(row.get("user") or "")
    error = row.get("error")
    return TurnEntry(
        seq=seq, dialogue_id=str(row.get("dialogue_id")), turn_index=int(row.get("turn_index")
                                                                          or 0),
        verdict=verdict if isinstance(verdict, bool) else None, rule=rule,
        error=str(error) if error else None, user=" ".join(user.split())[:SNIPPET],
        text=" ".join((str(row.get("dialogue_id")), system, user)).lower(),
        slots=tuple(slots), domains=tuple(dict.fromkeys(domain_of(s) for s in slots)),
        kinds=tuple(sorted(set(kinds))), flagged=tuple(dict.fromkeys(flagged)))


def _dialogues(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Consecutive rows of one dialogue (runs keep a dialogue's turns together)."""
    group: list[dict[str, Any]] = []
    for row in rows:
        if group and row.get("dialogue_id") != group[0].get("dialogue_id"):
            yield group
            group = []
        group.append(row)
    if group:
        yield group


def build_index(job_id: str, key: Any, rows: Iterator[dict[str, Any]],
                summary: dict[str, Any] | None) -> RunIndex:
    ignore_none = "nospace" in str((summary or {}).get("rule_match") or "")
    entries: list[TurnEntry] = []
    versions: dict[str, None] = {}
    slots: dict[str, SlotFigures] = {}
    domains: dict[str, DomainFigures] = {}
    for group in _dialogues(rows):
        kinds: dict[int, list[str]] = {}
        usable = [r for r in group if isinstance(r.get("verdict"), bool)]
        for item in audit_items(usable, ignore_none_pairs=ignore_none):
            kinds.setdefault(item.turn_index, []).append(item.kind)
        for row in group:
            entry = _entry(len(entries), row, kinds.get(int(row.get("turn_index") or 0), ()))
            entries.append(entry)
            _count(entry, row, slots, domains, versions)
    return RunIndex(job_id, key, list(versions), entries, dict(sorted(slots.items())),
                    dict(sorted(domains.items())),
                    sorted({k for e in entries for k in e.kinds}),
                    {(e.dialogue_id, e.turn_index): i for i, e in enumerate(entries)})


def _count(entry: TurnEntry, row: dict[str, Any], slots: dict[str, SlotFigures],
           domains: dict[str, DomainFigures], versions: dict[str, None]) -> None:
    pred = row.get("pred_turn_state") or {}
    gold = row.get("gold_turn_state") or {}
    for version in gold:
        versions.setdefault(str(version), None)
    for slot in entry.slots:
        figures = slots.setdefault(slot, SlotFigures())
        figures.involved += 1
        figures.flagged += slot in entry.flagged
        for version, state in gold.items():
            if not _same(pred.get(slot), (state or {}).get(slot)):
                figures.mismatch[version] = figures.mismatch.get(version, 0) + 1
    for domain in entry.domains:
        figures_d = domains.setdefault(domain, DomainFigures())
        figures_d.turns += 1
        if entry.verdict is not None:
            figures_d.judged += 1
            figures_d.judge_ok += entry.verdict
        for version, ok in entry.rule:
            if ok is not None:
                figures_d.rule_turns[version] = figures_d.rule_turns.get(version, 0) + 1
                figures_d.rule_ok[version] = figures_d.rule_ok.get(version, 0) + ok


class IndexCache:
    """The indexes of the most recently used jobs, built at most once at a time per job."""

    def __init__(self, reads: JudgmentReads, size: int = 6) -> None:
        self.reads = reads
        self.size = size
        self.items: OrderedDict[str, RunIndex] = OrderedDict()
        self.lock = threading.Lock()
        self.building: dict[str, threading.Lock] = {}
        self.warming: set[str] = set()

    def _key(self, row: JobRow) -> Any:
        return (row.updated_at, row.status)

    def peek(self, row: JobRow) -> RunIndex | None:
        with self.lock:
            index = self.items.get(row.id)
            if index is not None and index.key == self._key(row):
                self.items.move_to_end(row.id)
                return index
        return None

    def get(self, row: JobRow) -> RunIndex:
        """The index of job ``row`` (a jobs-table row of the viewer's project)."""
        index = self.peek(row)
        if index is not None:
            return index
        with self.lock:
            gate = self.building.setdefault(row.id, threading.Lock())
        with gate:
            index = self.peek(row)
            if index is not None:
                return index
            rows = (r for _, r in self.reads.slim_rows(row.project_id, row.id))
            index = build_index(row.id, self._key(row), rows, row.summary)
            with self.lock:
                self.items[row.id] = index
                self.items.move_to_end(row.id)
                while len(self.items) > self.size:
                    self.items.popitem(last=False)
        return index

    @staticmethod
    def large(row: JobRow) -> bool:
        """Whether the run is indexed in the background (more than :data:`SYNC_INDEX`)."""
        return int((row.summary or {}).get("turns") or 0) > SYNC_INDEX

    def ready(self, row: JobRow) -> RunIndex:
        """The index of a finished run for a page that needs it: built here for a small run,
        in the background for a large one (:class:`Preparing` until it is there)."""
        index = self.peek(row)
        if index is not None:
            return index
        if not self.large(row):
            return self.get(row)
        self.warm(row)
        raise Preparing(f"the turn index of run {row.id}")

    def ready_all(self, rows: list[JobRow]) -> list[RunIndex]:
        """:meth:`ready` for several runs: every missing index starts building at once."""
        found: list[RunIndex] = []
        waiting: list[str] = []
        for row in rows:
            try:
                found.append(self.ready(row))
            except Preparing:
                waiting.append(row.id)
        if waiting:
            raise Preparing(f"the turn indexes of {len(waiting)} "
                            f"{'run' if len(waiting) == 1 else 'runs'} ({', '.join(waiting)})")
        return found

    def warm(self, row: JobRow) -> None:
        """Start building the index in the background (the page does not wait for it)."""
        with self.lock:
            if row.id in self.warming:
                return
            self.warming.add(row.id)
        if self.peek(row) is not None:
            with self.lock:
                self.warming.discard(row.id)
            return
        threading.Thread(target=self._warm, args=(row,), daemon=True,
                         name=f"web-index-{row.id}").start()

    def _warm(self, row: JobRow) -> None:
        # a job deleted meanwhile fails here; the next request for it says so
        try:
            with contextlib.suppress(Exception):
                self.get(row)
        finally:
            with self.lock:
                self.warming.discard(row.id)
