"""Agreement while reviewers label: counts and inter-reviewer agreement at once (cheap, on
every request), and the agreement of judge and RULE with the collected labels recomputed in
the background with the library's statistics (``judge.analysis.agreement_report``, as
``dst-judge agreement`` prints them), so a save never waits for a bootstrap.

The labels are those of the job's predictions (any judge run on the same predictions file
adds to them). The background result is keyed by a fingerprint of those labels (and of the
run's review sample); a request that finds it stale schedules one recomputation (a single
worker thread, one job at a time) and shows the previous figures marked as updating.

The review sample a run's reviewers label is stored in the project's file store (kind
``sample``, named after the job), not in this process: every replica, and a restarted one,
computes the population estimates from the same sample.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sklearn.metrics import cohen_kappa_score

from .. import analysis
from ..service import Service, job_subject
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


def fingerprint(labels: list[dict[str, Any]]) -> tuple[Any, ...]:
    return (len(labels), max((float(i["updated_at"]) for i in labels), default=0.0),
            sum(int(i["id"]) for i in labels))


def _kappa(a: list[int], b: list[int]) -> float | None:
    if len(a) < 2 or len(set(a) | set(b)) < 2:
        return None
    value = float(cohen_kappa_score(a, b))
    return None if value != value else value  # NaN: no variation


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
                      "kappa": _kappa(a, b)})
    turns = {(i["dialogue_id"], int(i["turn_index"])) for i in labels}
    return {"labels": len(labels), "turns": len(turns), "reviewers": reviewers,
            "mine": reviewers.get(me, {"turns": 0, "slots": 0}), "pairs": pairs}


def sample_name(job_id: str) -> str:
    """The stored name of a run's review sample."""
    return f"review-sample-{job_id}.jsonl"


def store_sample(service: Any, project_id: str, job_id: str, sample: Any) -> None:
    """Keep the sample reviewers of this run label in the project's file store, named after
    the run. The store is content-addressed per kind, so a byte-identical sample stored for
    another run (two runs of the same predictions can draw the same turns) would keep that
    run's name: the copy for this run then ends in blank lines (which readers skip)."""
    text = "".join(json.dumps(t.model_dump(), ensure_ascii=False) + "\n" for t in sample.turns)
    for padding in range(8):
        record, _ = service.files.add(project_id, "sample", sample_name(job_id),
                                      io.BytesIO((text + "\n" * padding).encode("utf-8")))
        if record["name"] == sample_name(job_id):
            return
    log.warning("could not store the review sample of job %s under its own name", job_id)


def stored_sample(service: Any, project_id: str, job_id: str) -> tuple[str | None, Any]:
    """The run's most recently stored review sample (file id and sample), if any."""
    for record in service.files.list(project_id, kind="sample", limit=100):
        if record["name"] == sample_name(job_id):
            path = service.files.local_path(record["sha256"])
            return record["id"], analysis.load_sample(path)
    return None, None


class AgreementBoard:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.results: dict[str, Computed] = {}
        self.pending: set[str] = set()
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="web-agreement")

    def panel(self, project_id: str, row: Any, index: RunIndex, me: str) -> dict[str, Any]:
        """The panel of a judge run (its job row): the labels of its predictions only."""
        job_id = row.id
        labels = self.service.labels.list(project_id, subject=job_subject(row))
        sample_id, sample = stored_sample(self.service, project_id, job_id)
        mark = (*fingerprint(labels), sample_id)
        with self.lock:
            computed = self.results.get(job_id)
            stale = computed is None or computed.fingerprint != mark
            if stale and job_id not in self.pending and labels:
                self.pending.add(job_id)
                self.executor.submit(self._compute, job_id, index, labels, mark, sample)
            updating = job_id in self.pending
        return {"quick": quick_stats(labels, me), "computed": computed,
                "stale": stale and bool(labels), "updating": updating}

    def _compute(self, job_id: str, index: RunIndex, labels: list[dict[str, Any]],
                 mark: tuple[Any, ...], sample: Any) -> None:
        started = time.perf_counter()
        try:
            result = compute(index, labels, mark, started, sample)
        except Exception as exc:  # shown on the panel; the labels themselves are safe
            log.exception("agreement of job %s failed", job_id)
            result = Computed(mark, [], 0, time.perf_counter() - started, time.time(),
                              error=str(exc))
        with self.lock:
            self.results[job_id] = result
            self.pending.discard(job_id)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def alt_test_caption(block: dict[str, Any]) -> str:
    """The test's settings and its verdict (or why it could not run), as the table's caption."""
    head = (f"Judge vs reviewers: alternative-annotator test (ε = {block['epsilon']:g}, "
            f"{block['correction']} at q = {block['q']:g}). ")
    if block["enough_overlap"]:
        return (head + f"ω = {block['winning_rate']:.2f}, ρ = "
                f"{block['average_advantage']:.2f}: {block['verdict']}")
    return head + str(block["verdict"])


def compute(index: RunIndex, labels: list[dict[str, Any]], mark: tuple[Any, ...],
            started: float, sample: Any = None) -> Computed:
    """The library's agreement report on the run's verdicts and the collected labels, as the
    tables ``dst-judge agreement`` prints (population estimates when a sample is reviewed)."""
    rows = [{"dialogue_id": e.dialogue_id, "turn_index": e.turn_index, "verdict": e.verdict,
             "rule": {v: ok for v, ok in e.rule if ok is not None}} for e in index.entries]
    human = human_labels(label_records(labels))
    labelled = {(d, t) for d, t in ((i["dialogue_id"], int(i["turn_index"])) for i in labels)}
    if sample is not None and not any((t.dialogue_id, t.turn_index) in labelled
                                      for t in sample.turns):
        sample = None  # nothing of the sample is labelled yet
    report = analysis.agreement_report(rows, human, sample=sample, n_boot=N_BOOT, seed=0)
    tables = [
        Table("Agreement (judge, RULE, humans)", tuple(analysis.AGREEMENT_HEADER[:4]),
              [tuple(r[:4]) for r in analysis.format_agreement(report)]),
        Table("Chance-corrected", tuple(analysis.COEFFICIENT_HEADER),
              [tuple(r) for r in analysis.format_coefficients(report)]),
    ]
    reviewers = analysis.format_reviewers(report)
    if reviewers:
        tables.append(Table("Reviewers as a group", tuple(analysis.REVIEWER_HEADER),
                            [tuple(r) for r in reviewers]))
    alternative = report.get("alt_test")
    if alternative:
        tables.append(Table(alt_test_caption(alternative), tuple(analysis.ALT_TEST_HEADER),
                            [tuple(r) for r in analysis.format_alt_test(alternative)]))
    population = analysis.format_population(report)
    if population:
        tables.append(Table("Population estimates from the stratified sample",
                            tuple(analysis.POPULATION_HEADER[:4]),
                            [tuple(r[:4]) for r in population]))
    estimates = analysis.format_estimates(report.get("population"))
    if estimates:
        tables.append(Table("Estimates of TSA: the judge's own figure, labels alone and "
                            "prediction-powered (95 % t intervals)",
                            tuple(analysis.ESTIMATE_HEADER), [tuple(r) for r in estimates]))
    return Computed(
        fingerprint=mark, tables=tables,
        human_turns=int((report.get("human") or {}).get("turns") or 0),
        seconds=time.perf_counter() - started, at=time.time())
