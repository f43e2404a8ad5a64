"""Agreement while reviewers label: counts and inter-reviewer agreement at once (cheap, on
every request), and the agreement of judge and RULE with the collected labels recomputed in
the background with the library's statistics (``judge.analysis.agreement_report``, as
``dst-judge agreement`` prints them), so a save never waits for a bootstrap.

The labels are those of the job's predictions (any judge run on the same predictions file
adds to them). The background result is keyed by a fingerprint of those labels (and of the
run's review sample); a request that finds it stale schedules one recomputation (a single
worker thread, one job at a time) and shows the previous figures marked as updating.

The review sample a run's reviewers label is stored in the project's file store (kind
``sample``, named after the job) and referenced by file id (the service's ``samples``), not
kept in this process: every replica, and a restarted one, computes the population estimates
from the same sample, and it is found however many files the project holds. It is a simple
random sample (the design estimates need), drawn again and checked against the run before
every use, and it is the run's *estimate sample*: fixed once any of its turns has a label, so
that which labels count cannot change after they exist. Another draw is then a separate
sample, referenced by its n and seed; its labels count for agreement, not for the estimates.
A sample is drawn only by an explicit ``POST`` of a reviewer, never by opening a page.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import analysis
from .._errors import DSTJudgeError
from ..analysis import tables as display
from ..data import dialogue_key
from ..service import ESTIMATE, JobRow, Service, job_subject, predictions_sha256, separate_name
from ._index import RunIndex
from ._labelfile import human_labels, label_records

log = logging.getLogger("dst_judge.web")
N_BOOT = 200


@dataclass
class Table:
    caption: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass
class Computed:
    fingerprint: tuple[Any, ...]
    tables: list[Table]
    human_turns: int
    seconds: float
    at: float
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    """What the estimates count and leave out, shown beside them."""


def fingerprint(labels: list[dict[str, Any]]) -> tuple[Any, ...]:
    return (len(labels), max((float(i["updated_at"]) for i in labels), default=0.0),
            sum(int(i["id"]) for i in labels))


def label_counts(labels: list[dict[str, Any]], me: str) -> dict[str, int]:
    """The panel's headline counts (what a save answers with): labels, labelled turns,
    reviewers, and the turns ``me`` labelled."""
    return {"labels": len(labels),
            "turns": len({(i["dialogue_id"], int(i["turn_index"])) for i in labels}),
            "reviewers": len({i["reviewer"] for i in labels}),
            "mine": sum(1 for i in labels if i["reviewer"] == me and not i["slot"])}


def quick_stats(labels: list[dict[str, Any]], me: str) -> dict[str, Any]:
    """Label counts per reviewer and pairwise agreement of reviewers on turn labels."""
    reviewers: dict[str, dict[str, int]] = {}
    turn_labels: dict[str, dict[tuple[str, int], int]] = {}
    for item in labels:
        counts = reviewers.setdefault(item["reviewer"], {"turns": 0, "slots": 0, "correct": 0,
                                                         "incorrect": 0, "unsure": 0})
        counts["slots" if item["slot"] else "turns"] += 1
        if not item["slot"]:
            counts[item["label"]] += 1
            if item["label"] != "unsure":
                turn_labels.setdefault(item["reviewer"], {})[
                    (item["dialogue_id"], int(item["turn_index"]))] = int(
                        item["label"] == "correct")
    pairs = []
    for x, y in itertools.combinations(sorted(turn_labels), 2):
        both = sorted(set(turn_labels[x]) & set(turn_labels[y]))
        a = [turn_labels[x][k] for k in both]
        b = [turn_labels[y][k] for k in both]
        agree = sum(p == q for p, q in zip(a, b, strict=True))
        pairs.append({"a": x, "b": y, "n": len(both),
                      "agreement": 100.0 * agree / len(both) if both else None,
                      "kappa": analysis.cohen_kappa(a, b)})
    turns = {(i["dialogue_id"], int(i["turn_index"])) for i in labels}
    return {"labels": len(labels), "turns": len(turns), "reviewers": reviewers,
            "mine": reviewers.get(me, {"turns": 0, "slots": 0}), "pairs": pairs}


SAMPLE_PREFIX = "review-sample-"


def sample_name(job_id: str, n: int | None = None, seed: int | None = None) -> str:
    """The stored name of a run's estimate sample, or (with ``n`` and ``seed``) of another
    draw, separate from it."""
    if n is None:
        return f"{SAMPLE_PREFIX}{job_id}.jsonl"
    return f"{SAMPLE_PREFIX}{job_id}-n{n}-seed{seed}.jsonl"


def index_rows(index: RunIndex) -> list[dict[str, Any]]:
    """The run's turns with judge and RULE verdicts, as a draw and its check read them."""
    return [{"dialogue_id": e.dialogue_id, "turn_index": e.turn_index, "verdict": e.verdict,
             "rule": {v: ok for v, ok in e.rule if ok is not None}} for e in index.entries]


def reference(n: int | None = None, seed: int | None = None) -> str:
    """The name the run's sample is referenced by: its estimate sample, or (with ``n`` and
    ``seed``) a separate draw."""
    return ESTIMATE if n is None else separate_name(n, 0 if seed is None else seed)


def store_sample(service: Any, project_id: str, job_id: str, sample: Any,
                 n: int | None = None, seed: int | None = None,
                 token_id: str | None = None) -> float:
    """Keep a sample reviewers of this run label in the project's file store and reference
    it by file id as the run's estimate sample (or, with ``n`` and ``seed``, as a separate
    draw); returns when the reference was made. The store is content-addressed, so a
    byte-identical sample of another run is one file referenced twice. A replaced estimate
    sample's file goes when the review page drew it and nothing else references it."""
    name = sample_name(job_id, n, seed)
    text = "".join(json.dumps(t.model_dump(), ensure_ascii=False) + "\n" for t in sample.turns)
    record, _ = service.files.add(project_id, "sample", name,
                                  io.BytesIO(text.encode("utf-8")), token_id)
    old = service.samples.put(project_id, job_id, reference(n, seed), record["id"], token_id)
    if old is not None:
        try:
            stale = service.files.get(project_id, old)
            if stale["name"].startswith(SAMPLE_PREFIX):  # drawn here, not an upload
                service.jobs.refuse_if_in_use(project_id, old)
                service.files.delete(project_id, old)
        except DSTJudgeError:  # still in use (another run's sample): it stays
            pass
    found = service.samples.get(project_id, job_id, reference(n, seed))
    return float(found["created_at"])


def labels_since(labels: Iterable[Mapping[str, Any]],
                 since: float | None) -> list[Mapping[str, Any]]:
    """The labels given (or last changed) at or after ``since``: what a separate sample,
    which starts empty when it is created, counts as its own. ``None``: every label."""
    if since is None:
        return list(labels)
    return [i for i in labels if float(i.get("updated_at") or 0.0) >= since]


def stored_sample(service: Any, project_id: str, job_id: str, n: int | None = None,
                  seed: int | None = None) -> tuple[str | None, Any]:
    """The run's estimate sample (or its separate draw of ``n`` and ``seed``), found by its
    reference: file id and sample, whose messages name the stored file, never a server path.
    Only reads."""
    found = service.samples.get(project_id, job_id, reference(n, seed))
    if found is None:
        return None, None
    sample = analysis.load_sample(service.files.local_path(found["sha256"]))
    sample.path = str(found["file_name"])
    return str(found["file_id"]), sample


def labelled_turns(labels: Iterable[Mapping[str, Any]]) -> set[tuple[str, int]]:
    """Turns with any label (turn or slot, any reviewer), as sample turn keys."""
    return {(dialogue_key(str(i["dialogue_id"])), int(i["turn_index"])) for i in labels}


def sample_notes(report: Mapping[str, Any]) -> list[str]:
    """Beside the figures: what the estimates count and leave out (or why there are none)."""
    population = report.get("population")
    if not population:
        if not report.get("population_note"):
            return []
        return ["No population estimate: these labels come from review queues, which are not a "
                "random sample of the run, so they give agreement figures only. Label turns of "
                "the random sample queue for estimates."]
    estimation = population.get("estimation") or {}
    undecided = estimation.get("undecided_sampled_turns") or {}
    design = estimation.get("design") or {}
    notes = [
        f"Estimate sample: {design.get('design')} design, {population['sampled_turns']} "
        f"sampled turns (seed {design.get('seed')}); {population['labelled_turns']} labelled, "
        f"{estimation['unlabelled_sampled_turns']['count']} unlabelled, "
        f"{(undecided.get('tied') or {}).get('count', 0)} tied (reviewers split), "
        f"{(undecided.get('unsure') or {}).get('count', 0)} unsure; "
        f"{estimation['left_out']['count']} labelled turns outside the sample are left out "
        "of the estimates (they count for agreement)."]
    if undecided.get("count"):
        notes.append(undecided["treatment"] + ".")
        for metric, bounds in (undecided.get("bounds") or {}).items():
            low, high = bounds["lower"]["ppi"]["value"], bounds["upper"]["ppi"]["value"]
            if low is not None and high is not None:
                notes.append(f"{metric.upper()} (ppi) if every such turn were wrong: "
                             f"{low:.1f} %; if every one were correct: {high:.1f} %.")
    if population.get("sample_check"):
        notes.append(f"Sample checked: {population['sample_check']}.")
    return notes


class AgreementBoard:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.results: dict[str, Computed] = {}
        self.pending: set[str] = set()
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="web-agreement")

    def panel(self, project_id: str, row: JobRow, index: RunIndex, me: str) -> dict[str, Any]:
        """The panel of a judge run (its job row): the labels of its predictions only."""
        job_id = row.id
        labels = self.service.labels.list(project_id, subject=job_subject(row))
        sample_id, sample = stored_sample(self.service, project_id, job_id)
        mark = (*fingerprint(labels), sample_id)
        digest = predictions_sha256(job_subject(row))
        with self.lock:
            computed = self.results.get(job_id)
            stale = computed is None or computed.fingerprint != mark
            if stale and job_id not in self.pending and labels:
                self.pending.add(job_id)
                self.executor.submit(self._compute, job_id, index, labels, mark, sample,
                                     digest)
            updating = job_id in self.pending
        return {"quick": quick_stats(labels, me), "computed": computed,
                "stale": stale and bool(labels), "updating": updating}

    def _compute(self, job_id: str, index: RunIndex, labels: list[dict[str, Any]],
                 mark: tuple[Any, ...], sample: Any, digest: str | None = None) -> None:
        started = time.perf_counter()
        try:
            result = compute(index, labels, mark, started, sample, digest)
        except DSTJudgeError as exc:  # a refused sample or labels: said on the panel
            result = Computed(mark, [], 0, time.perf_counter() - started, time.time(),
                              error=str(exc))
        except Exception as exc:  # shown on the panel; the labels themselves are safe
            log.exception("agreement of job %s failed", job_id)
            result = Computed(mark, [], 0, time.perf_counter() - started, time.time(),
                              error=str(exc))
        with self.lock:
            self.results[job_id] = result
            self.pending.discard(job_id)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def alt_test_caption(block: Mapping[str, Any]) -> str:
    """The test's settings and its verdict (or why it could not run), as the table's caption."""
    head = (f"Judge vs reviewers: alternative-annotator test (ε = {block['epsilon']:g}, "
            f"{block['correction']} at q = {block['q']:g}). ")
    if block["enough_overlap"]:
        return (head + f"ω = {block['winning_rate']:.2f}, ρ judge = "
                f"{block['average_advantage']:.2f} (ties, {100 * block['tie_share']:.0f} % of "
                f"turns, count as wins): {block['verdict']}")
    return head + str(block["verdict"])


def compute(index: RunIndex, labels: list[dict[str, Any]], mark: tuple[Any, ...],
            started: float, sample: Any = None, digest: str | None = None) -> Computed:
    """The library's agreement report on the run's verdicts and the collected labels, as the
    tables ``dst-judge agreement`` prints (population estimates when a sample is reviewed,
    drawn again and checked first; ``digest`` is the run's predictions sha256, when known)."""
    rows = index_rows(index)
    human = human_labels(label_records(labels))
    labelled = labelled_turns(labels)
    if sample is not None and not any(t.key in labelled for t in sample.turns):
        sample = None  # nothing of the sample is labelled yet
    report = analysis.agreement_report(rows, human, sample=sample, n_boot=N_BOOT, seed=0,
                                       predictions_sha256=digest, run_name="this run")
    tables = [
        Table("Agreement (judge, RULE, humans)", tuple(display.AGREEMENT_HEADER[:4]),
              [tuple(r[:4]) for r in display.format_agreement(report)]),
        Table("Chance-corrected", tuple(display.COEFFICIENT_HEADER),
              [tuple(r) for r in display.format_coefficients(report)]),
    ]
    reviewers = display.format_reviewers(report)
    if reviewers:
        tables.append(Table("Reviewers as a group", tuple(display.REVIEWER_HEADER),
                            [tuple(r) for r in reviewers]))
    alternative = report.get("alt_test")
    if alternative:
        tables.append(Table(alt_test_caption(alternative), tuple(display.ALT_TEST_HEADER),
                            [tuple(r) for r in display.format_alt_test(alternative)]))
    population = display.format_population(report)
    block = report["population"]
    if population and block is not None:
        tables.append(Table("Population agreement from the "
                            f"{display.sample_words(block)}",
                            tuple(display.POPULATION_HEADER[:4]),
                            [tuple(r[:4]) for r in population]))
    estimates = display.format_estimates(report.get("population"))
    if estimates:
        tables.append(Table("Estimates of TSA: the judge's own figure, labels alone and "
                            "prediction-powered (95 % t intervals)",
                            tuple(display.ESTIMATE_HEADER), [tuple(r) for r in estimates]))
    return Computed(
        fingerprint=mark, tables=tables,
        human_turns=int(summary["turns"] if (summary := report.get("human")) else 0),
        seconds=time.perf_counter() - started, at=time.time(),
        notes=sample_notes(report) + ([f"Warning: {tie['warning']}."] if (tie := report.get(
            "labels_tie")) and tie["warning"] else []))
