"""``leaderboard`` jobs: ``dst-judge leaderboard`` on the server. The systems are predictions
files and judge runs of the project, mixed; the result is the JSON ``--json`` writes
(:meth:`judge.analysis.Leaderboard.to_json`), with each system's ``source`` its file or job id
(the web's page links a run to its run page) and no server path anywhere."""

from __future__ import annotations

import gc

from ..._errors import InputError
from ...analysis import (
    Layout,
    LeaderboardJson,
    SystemTurns,
    build_leaderboard,
    score_predictions,
    score_run,
)
from ...data import CorrectedGold, apply_each, load_dialogues, load_predictions, load_schema
from ...metrics import MetricOptions
from ...pipeline import Run
from ..db import JobRow
from ..jobs import JobStatus, first_run, job_run, run_input_files
from ._inputs import Inputs, as_json, corrections_summary, ids_of, read_correction_files, stem
from ._runners import Outcome, ThreadedRunner

READING = "dialogues whole, one system at a time"


class LeaderboardRunner(ThreadedRunner):
    """Scores each system on the job's dialogues (one at a time: a system's states are dropped
    once its verdicts are columns), then the leaderboard's statistics; CPU work in a thread."""

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        options = dict(job.options)
        systems_ids = ids_of(job.inputs["systems"])
        inputs.prefetch([job.inputs["schema"], job.inputs["dialogues"],
                         *(i for i in systems_ids if not i.startswith("job_")),
                         *ids_of(job.inputs.get("corrections"))])
        schema = load_schema(inputs.path(str(job.inputs["schema"]))[0])
        dialogues = load_dialogues(inputs.path(str(job.inputs["dialogues"]))[0], schema=schema)
        wanted = [dialogues.resolve_version(v) for v in
                  (options.get("gold") or [dialogues.resolve_version(None)])]
        corrected: list[CorrectedGold] = []
        located = read_correction_files(inputs, ids_of(job.inputs.get("corrections")))
        versions = list(wanted)
        if located:
            dialogues, corrected = apply_each(dialogues, located, schema=schema)
            by_base = {c.base: c.name for c in corrected}
            if not set(by_base) & set(wanted):
                raise InputError(f"the corrections correct {', '.join(sorted(by_base))}, not "
                                 f"a version this job scores ({', '.join(wanted)}): add it "
                                 "to options.gold")
            versions = [name for v in wanted for name in (v, by_base.get(v)) if name]
        metric_options = MetricOptions(per_dialogue=False, breakdowns=False)
        layout = Layout.of(dialogues, schema, versions, separator=schema.multi_value_separator)
        names: list[str] | None = options.get("names")
        systems: list[SystemTurns] = []
        for position, ref in enumerate(systems_ids):
            name = names[position] if names else None
            if ref.startswith("job_"):
                run, predictions_id = self._run_of(job.project_id, ref)
                predictions = load_predictions(inputs.path(predictions_id)[0], dialogues,
                                               schema)
                system = score_run(run, dialogues, schema, versions=versions,
                                   options=metric_options, name=name, predictions=predictions)
            else:
                path, row = inputs.path(ref)
                label = name or (row.get("info") or {}).get("system_name") or stem(row["name"])
                predictions = load_predictions(path, dialogues, schema, name=label)
                system = score_predictions(dialogues, predictions, schema, versions=versions,
                                           options=metric_options, name=label)
            system.source = ref
            del predictions
            systems.append(system)
            gc.collect()  # one system's states at a time
        if not names:
            taken = [s.name for s in systems]
            for system in systems:
                if taken.count(system.name) > 1:
                    system.name = f"{system.name} ({system.source})"
        board = build_leaderboard(
            layout, systems, options=metric_options, confidence=options.get("confidence", 0.95),
            correction=options.get("correction", "holm"),
            breakdowns=options.get("breakdowns", True),
            recorded={"options": metric_options.model_dump(
                mode="json", exclude={"per_dialogue", "breakdowns"}), "reading": READING})
        summary: LeaderboardJson = board.to_json()
        if corrected:
            summary["corrections"] = corrections_summary(corrected)
        return Outcome(JobStatus.SUCCEEDED, 0, summary=as_json(summary, inputs))

    def _run_of(self, project_id: str, job_id: str) -> tuple[Run, str]:
        """A judge run of the project (its rows from the database) and its predictions file."""
        run = job_run(self.db, project_id, job_id)
        with self.db.read() as conn:
            source = first_run(conn, project_id, job_id)
            if source is None:
                raise InputError(f"job {job_id} is not a judge run of this project")
            files = run_input_files(conn, project_id, source)
        if "predictions" not in files:
            raise InputError(f"job {job_id}: its predictions file is not in this project")
        return run, files["predictions"]
