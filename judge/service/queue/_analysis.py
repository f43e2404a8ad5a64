"""The analysis jobs: metrics, agreement, compare and audit, one runner each (the table of
kinds, :mod:`._kinds`, picks it). Each is CPU work in a thread with no model calls: the same
library calls as the CLI commands of the same name, with the runs they read taken from the
database through the run store (:func:`judge.service.jobs.job_run`) and server paths kept
out of the results."""

from __future__ import annotations

import json
from typing import Any

from ..._errors import InputError
from ...analysis import (
    agreement_report,
    audit_gold,
    audit_items,
    method_table,
    open_candidates,
    queue_records,
    render_audit,
    run_differences,
    source_from_predictions,
)
from ...data import (
    CorrectedGold,
    apply_each,
    load_dialogues,
    load_predictions,
    load_schema,
    scored_version,
)
from ...metrics import MetricOptions, compute_metrics, paper_tables
from ...pipeline import Run, corrected_rows
from ..db import JobRow
from ..jobs import (
    EstimateInputs,
    JobStatus,
    first_run,
    job_run,
    read_estimate_inputs,
    run_input_files,
)
from ._inputs import (
    Inputs,
    as_json,
    corrections_summary,
    finite,
    ids_of,
    read_correction_files,
    stem,
    subset,
)
from ._runners import Outcome, ThreadedRunner


class _RunReader(ThreadedRunner):
    """What the analyses of judge runs share: the runs, labels and sample they read, and a
    run's rows with the verdicts of the job's corrected gold added."""

    def _estimate_inputs(self, job: JobRow, inputs: Inputs) -> EstimateInputs:
        """The runs, labels and sample of an agreement or compare job, checked as at
        submission; their upload names stand for server paths in every message."""
        found = read_estimate_inputs(self.jobs, self.store, job.project_id, job.kind,
                                     job.inputs)
        inputs.names.update({path: name for path, (name, _) in found.paths.items()})
        return found

    def _corrected_rows(self, job: JobRow, run: Run, inputs: Inputs
                        ) -> tuple[list[dict[str, Any]], list[CorrectedGold]]:
        """The run's rows with the RULE verdicts of each corrected version added (computed from
        its judged turns with the run's own dialogues and schema: no model call)."""
        correction_ids = ids_of(job.inputs.get("corrections"))
        if not correction_ids:
            return [dict(row) for row in run.rows], []
        with self.db.read() as conn:
            source = first_run(conn, job.project_id, str(job.inputs["run"]))
            if source is None:
                raise InputError(f"job {job.inputs['run']} is not a judge run of this project")
            files = run_input_files(conn, job.project_id, source)
        inputs.prefetch([files.get("schema"), files.get("dialogues"), *correction_ids])
        schema = load_schema(inputs.path(files["schema"])[0])
        dialogues = load_dialogues(inputs.path(files["dialogues"])[0], schema=schema)
        return corrected_rows(run.rows, dialogues, schema, run.summary.get("rule_match"),
                              read_correction_files(inputs, correction_ids))


class AgreementRunner(_RunReader):
    """agreement jobs: a judge run against human labels (``dst-judge agreement``)."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        found = self._estimate_inputs(job, inputs)
        rows, corrected = self._corrected_rows(job, found.runs[0], inputs)
        report = agreement_report(rows, found.labels[0] if found.labels
                                  else None, sample=found.sample,
                                  predictions_sha256=found.digests[0],
                                  run_name=found.names[0], **job.options)
        if corrected:
            report = {**report, "corrections": corrections_summary(corrected)}
        return Outcome(JobStatus.SUCCEEDED, 0, summary=as_json(report, inputs))


class CompareRunner(_RunReader):
    """compare jobs: judge runs side by side (``dst-judge compare``)."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        found = self._estimate_inputs(job, inputs)
        labels = [human.per_turn() for human in found.labels]
        table = method_table(found.runs, labels[0] if len(labels) == 1 else None)
        if found.pairing:
            table["labels_pairing"] = found.pairing
        if found.sample is not None:
            table["sample_check"] = found.sample_check
            table["differences"] = run_differences(found.runs, labels, found.sample,
                                                   drawn_from=found.drawn_from,
                                                   resolutions=[h.resolve() for h in
                                                                found.labels],
                                                   **job.options)
        return Outcome(JobStatus.SUCCEEDED, 0, summary=as_json(table, inputs))


class MetricsRunner(ThreadedRunner):
    """metrics jobs: the exact-match suite on predictions files (``dst-judge metrics``)."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        options = dict(job.options)
        gold = options.pop("gold", None)
        chosen_ids: dict[str, Any] = {k: options.pop(k) for k in ("limit", "dialogue_ids")
                                      if k in options}
        schema = load_schema(inputs.path(job.inputs["schema"])[0])
        dialogues = subset(load_dialogues(inputs.path(job.inputs["dialogues"])[0]), chosen_ids)
        systems = []
        for file_id in job.inputs["predictions"]:
            path, row = inputs.path(file_id)
            name = (row.get("info") or {}).get("system_name") or stem(row["name"])
            systems.append(load_predictions(path, dialogues, schema, name=name))
        names = [s.name for s in systems]
        for system, file_id in zip(systems, job.inputs["predictions"], strict=True):
            if names.count(system.name) > 1:
                system.name = f"{system.name} ({file_id})"
        correction_ids = ids_of(job.inputs.get("corrections"))
        corrected: list[CorrectedGold] = []
        if correction_ids:
            dialogues, corrected = apply_each(
                dialogues, read_correction_files(inputs, correction_ids), schema=schema)
            chosen = scored_version(dialogues, corrected, gold, option="options.gold")
            gold = chosen.name
        metric_options = MetricOptions(**options)
        report = compute_metrics(dialogues, systems, schema, metric_options, gold=gold)
        summary = report.to_dict()
        if corrected:
            tables = paper_tables(dialogues, systems, schema, versions=[chosen.base],
                                  options=metric_options, corrected=[(chosen.base, chosen.name)])
            summary["corrections"] = corrections_summary(corrected)
            summary["change"] = {"columns": tables.change_columns,
                                 "rows": [[finite(v) for v in row]
                                          for row in tables.change_rows]}
        return Outcome(JobStatus.SUCCEEDED, 0, summary=as_json(summary, inputs))


class AuditRunner(_RunReader):
    """audit jobs: a judge run's audit page, or the label-error candidates of predictions
    files (``dst-judge audit``)."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        if "run" not in job.inputs:
            return self._audit_predictions(job, inputs)
        run = job_run(self.db, job.project_id, job.inputs["run"])
        rows, corrected = self._corrected_rows(job, run, inputs)
        ignore_none = "nospace" in str(run.summary.get("rule_match") or "")
        items = audit_items(rows, ignore_none_pairs=ignore_none)
        page = render_audit(run.summary, rows, items).encode("utf-8")
        listed = [{"dialogue_id": i.dialogue_id, "turn_index": i.turn_index, "slot": i.slot,
                   "kind": i.kind, "predicted": i.predicted, "gold": i.gold,
                   "verdict": i.verdict, "rule": i.rule,
                   "disagreeing_versions": i.disagreeing_versions} for i in items]
        summary = {"run": job.inputs["run"], "items": len(items),
                   "turns": len({(i.dialogue_id, i.turn_index) for i in items}),
                   "artifact": "audit.html", "list": listed,
                   **({"corrections": corrections_summary(corrected)} if corrected else {})}
        return Outcome(JobStatus.SUCCEEDED, 0, summary=summary,
                       artifacts={"audit.html": ("text/html; charset=utf-8", page)})

    def _audit_predictions(self, job: JobRow, inputs: Inputs) -> Outcome:
        """An audit of predictions files, no judge: the label-error candidates still open
        (those the job's corrections decide left out), for the web's candidates queue
        (``candidates.jsonl``, in review order, each with its evidence-order place) and as
        the audit page's ranking."""
        ids = [job.inputs.get("schema"), job.inputs["dialogues"], *job.inputs["predictions"],
               *ids_of(job.inputs.get("corrections"))]
        inputs.prefetch([i for i in ids if isinstance(i, str)])
        schema_id = job.inputs.get("schema")
        schema = load_schema(inputs.path(schema_id)[0]) if isinstance(schema_id, str) else None
        dialogues = load_dialogues(inputs.path(job.inputs["dialogues"])[0], schema=schema)
        sources = []
        for file_id in job.inputs["predictions"]:
            path, row = inputs.path(file_id)
            name = (row.get("info") or {}).get("system_name") or stem(row["name"])
            sources.append(source_from_predictions(load_predictions(path, dialogues, schema,
                                                                    name=name)))
        names = [s.name for s in sources]
        for source, file_id in zip(sources, job.inputs["predictions"], strict=True):
            if names.count(source.name) > 1:
                source.name = f"{source.name} ({file_id})"
        located = read_correction_files(inputs, ids_of(job.inputs.get("corrections")))
        audited, gold, decided = audit_gold(dialogues, located, schema=schema)
        found, dropped = open_candidates(audited, sources, gold=gold, schema=schema,
                                         decided=decided, order="evidence")
        records = queue_records(found, audited, gold, sources)
        listing = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        page = render_audit({}, [], [], sorted(found, key=lambda c: c.rank),
                            "review").encode("utf-8")
        summary = {"systems": [s.name for s in sources], "gold": gold,
                   "candidates": len(records), "decided": dropped,
                   "artifact": "audit.html", "queue": "candidates.jsonl"}
        if located:
            summary["corrections"] = len(located)
        return Outcome(JobStatus.SUCCEEDED, 0, summary=as_json(summary, inputs), artifacts={
            "audit.html": ("text/html; charset=utf-8", page),
            "candidates.jsonl": ("application/x-ndjson", listing.encode("utf-8"))})
