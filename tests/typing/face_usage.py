"""A caller of ``import judge``, checked by mypy (``tests/test_api.py``): the main jobs'
results are typed, so a wrong key or attribute here would be a mypy error."""

from __future__ import annotations

import judge
import judge.analysis
import judge.pipeline


def headline(run_dir: str) -> tuple[float, int, float | None]:
    """The judge's TSA of a run, its judged turns and the judge-vs-RULE kappa of 2.4."""
    run: judge.Run = judge.load_run(run_dir)
    report: judge.AgreementReport = judge.agreement_report(run.rows, n_boot=0)
    kappa = next((p["kappa"]["value"] for p in report["pairs"]
                  if p["name"] == "judge vs RULE-2.4"), None)
    return float(run.summary["tsa"]), report["judged_turns"], kappa


def ppi_tsa(run_dir: str, labels_path: str) -> float | None:
    run = judge.load_run(run_dir)
    sample = judge.draw_sample(run.rows, n=8, seed=1)
    labels = judge.load_labels(labels_path)
    found: judge.SampleEstimates = judge.sample_estimates(sample, [run.rows],
                                                          [labels.per_turn()])
    value = found["estimates"]["tsa"]["ppi"]["value"]
    return None if value is None else float(value)


def reviewers_kappa(run_dir: str, labels_path: str) -> float | None:
    """The reviewers' mean kappa and the alternative-annotator verdict, from the report's
    typed inner blocks."""
    run = judge.load_run(run_dir)
    report = judge.agreement_report(run.rows, judge.load_labels(labels_path), n_boot=0)
    human = report["human"]
    inter = human["inter_annotator"] if human else None
    test = report["alt_test"]
    if test is not None and test["passes"] is None:
        print(test["verdict"])
    return inter["mean_kappa"] if inter else None


def compared(run_dirs: list[str]) -> list[tuple[str, float | None]]:
    """Each run's method and its Cohen's kappa against RULE-2.4 (``dst-judge compare``)."""
    runs = [judge.load_run(d) for d in run_dirs]
    table: judge.analysis.MethodTable = judge.analysis.method_table(runs)
    return [(row["method"], row["kappa"]["2.4"]["value"]) for row in table["methods"]]


def labels_to_draw(run_dir: str) -> int:
    """Labelled turns for a 10-point PPI interval if judge and people differ on 10 %."""
    run = judge.load_run(run_dir)
    plan: judge.analysis.LabelPlan = judge.analysis.plan_labels(run.rows, width=10.0,
                                                                disagreement=0.1)
    return plan["ppi"]["labels_needed"]


def exact_jga(schema_path: str, dialogues_path: str, predictions_path: str) -> float:
    schema = judge.load_schema(schema_path)
    dialogues = judge.load_dialogues(dialogues_path, schema=schema)
    system = judge.load_predictions(predictions_path, dialogues, schema)
    report: judge.MetricsReport = judge.compute_metrics(
        dialogues, system, schema, judge.MetricOptions(match="exact"), gold="2.4")
    return float(report.systems[0].metrics["jga"])


def corrected(dialogues_path: str, corrections_path: str) -> tuple[str, int]:
    dialogues = judge.load_dialogues(dialogues_path)
    fixed: judge.CorrectedGold = judge.apply_corrections(
        dialogues, "2.1", judge.read_corrections([corrections_path]))
    return fixed.name, fixed.changed_turns


def ranked(schema_path: str, dialogues_path: str, paths: list[str]) -> list[tuple[str, int]]:
    schema = judge.load_schema(schema_path)
    dialogues = judge.load_dialogues(dialogues_path, schema=schema)
    options = judge.MetricOptions()
    systems = [judge.score_predictions(dialogues, judge.load_predictions(p, dialogues, schema),
                                       schema, versions=["2.4"], options=options)
               for p in paths]
    board: judge.Leaderboard = judge.build_leaderboard(
        judge.Layout.of(dialogues, schema, ["2.4"]), systems, options=options)
    return [(row.name, row.rank) for row in board.systems]


def batch_cost(config: judge.JudgeConfig, schema_path: str, dialogues_path: str,
               predictions_path: str) -> float | None:
    """What the run would cost through the Batch API (``None``: the model has no price)."""
    schema = judge.load_schema(schema_path)
    dialogues = judge.load_dialogues(dialogues_path, schema=schema)
    system = judge.load_predictions(predictions_path, dialogues, schema)
    figures: judge.pipeline.DryRun = judge.dry_run(
        judge.pipeline.plan_evaluation(config, schema, dialogues, system))
    return figures["cost_usd"]["batch"] if figures["priced"] else None


def judged_turns(result: judge.EvaluationResult) -> int:
    try:
        return len(result.rows)
    except judge.InputError as exc:
        raise judge.DSTJudgeError(str(exc)) from exc
