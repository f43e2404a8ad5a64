"""The inputs of agreement and compare jobs that make estimates, checked as the CLI checks them:
a sample file is drawn again from its run and refused unless it comes out the same, and labels
that name the predictions they judged (``predictions_sha256``) must name the run's (a judge
run's *subject*); a compare job pairs one labels file per run by those digests.

The checks run twice: when the job is submitted (a refusal is an HTTP 422 naming the input, so
a tampered sample never queues) and when it runs (the same function, a failed job with exit
status 2), so a job cannot skip them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._errors import InputError, ServiceError
from ...analysis import (
    HumanLabels,
    Sample,
    check_sample,
    load_labels,
    load_sample,
    pair_by_predictions,
    sampled_run,
)
from ...pipeline import Run
from ..storage import FileStore, job_subject, predictions_sha256
from ._jobs import JobStore
from ._runlog import JobRunLog

ESTIMATE_KINDS = ("agreement", "compare")


@dataclass
class EstimateInputs:
    """Runs, their predictions digests, labels files (paired with the runs) and the sample."""

    runs: list[Run]
    digests: list[str | None]
    names: list[str]
    labels: list[HumanLabels] = field(default_factory=list)
    sample: Sample | None = None
    sample_check: str | None = None
    drawn_from: int = 0
    """The position of the run the sample was drawn from."""
    pairing: str | None = None
    """A warning when labels files were paired with runs by order."""
    paths: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Server path → (upload name, input field), to name files without server paths."""

    def clean(self, text: str) -> str:
        for path, (name, _) in self.paths.items():
            text = text.replace(path, name)
        return text


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def read_estimate_inputs(jobs: JobStore, store: FileStore, project_id: str, kind: str,
                         inputs: dict[str, Any]) -> EstimateInputs:
    """Load and check an agreement or compare job's runs, labels and sample; a refusal is a
    :class:`ServiceError` 422 naming the input (``inputs.sample``, ``inputs.human[1]``)."""
    run_ids = [inputs["run"]] if kind == "agreement" else _as_list(inputs.get("runs"))
    runs, digests = [], []
    for job_id in run_ids:
        row = jobs.row(project_id, job_id)
        try:
            runs.append(JobRunLog(jobs.db, job_id, project_id=project_id).read_run())
        except InputError as exc:
            raise ServiceError(str(exc), status=422, field="inputs.run" if kind == "agreement"
                               else "inputs.runs") from None
        digests.append(predictions_sha256(job_subject(row)))
    found = EstimateInputs(runs, digests, [f"run {job_id}" for job_id in run_ids])

    def local(file_id: str, where: str) -> Path:
        record = store.get(project_id, file_id)
        path = store.local_path(record["sha256"])
        found.paths[str(path)] = (str(record["name"]), where)
        return path

    human_ids = _as_list(inputs.get("human"))
    sample_id = inputs.get("sample")
    where = "inputs.human"
    try:
        for index, file_id in enumerate(human_ids):
            where = "inputs.human" if kind == "agreement" else f"inputs.human[{index}]"
            found.labels.append(load_labels(local(file_id, where)))
        where = "inputs.sample"
        if sample_id:
            found.sample = load_sample(local(sample_id, where))
        _check(found, kind)
    except InputError as exc:
        named = found.paths.get(exc.path or "", ("", where))[1]
        raise ServiceError(found.clean(str(exc)), status=422, field=named) from None
    return found


def _check(found: EstimateInputs, kind: str) -> None:
    runs, digests, names, labels = found.runs, found.digests, found.names, found.labels
    if found.sample is not None and kind == "compare" and len(labels) != len(runs):
        raise ServiceError(f"a compare job with a sample takes one labels file per run "
                           f"({len(runs)} runs, {len(labels)} labels file(s))",
                           status=422, field="inputs.human")
    if found.sample is not None and not labels:
        raise ServiceError("a sample gives estimates from the labels of its turns: add the "
                           "labels file", status=422, field="inputs.human")
    if kind == "agreement":
        if labels:
            labels[0].check_predictions(digests[0], run=names[0])
    elif len(labels) == 1:
        for digest, name in zip(digests, names, strict=True):
            labels[0].check_predictions(digest, run=name)
    elif labels:
        found.labels, found.pairing = pair_by_predictions(labels, digests, names)
    if found.sample is not None:
        if kind == "compare":  # the run it was drawn from, at any position
            found.drawn_from = sampled_run(runs, found.sample, digests)
        found.sample_check = check_sample(found.sample, runs[found.drawn_from].rows,
                                          predictions_sha256=digests[found.drawn_from])


def check_estimate_job(jobs: JobStore, store: FileStore, project_id: str, kind: str,
                       inputs: dict[str, Any]) -> None:
    """At submission: refuse (422) an agreement or compare job whose sample or labels do not
    belong to its runs, before it is queued."""
    if kind in ESTIMATE_KINDS and (inputs.get("sample") or inputs.get("human")):
        read_estimate_inputs(jobs, store, project_id, kind, inputs)
