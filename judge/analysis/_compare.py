"""Side-by-side comparisons: judge methods on the same turns (the paper's Table 2) and DST
systems under the judge and the exact-match metrics (the paper's Figures 2-3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from .._errors import DataMismatchError
from .._io import open_output
from ..data import (
    DialogueSet,
    Located,
    Schema,
    apply_each,
    load_dialogues,
    load_predictions,
)
from ..method import agreement
from ..metrics import MetricOptions, compute_metrics
from ..pipeline import Run
from ._agreement import Bootstrap, compare_raters
from ._design import Tuning
from ._estimates import sample_estimates
from ._labels import Resolution, TurnKey, row_key
from ._ratings import read_ratings
from ._runinfo import differing_aspects, mixed_comparison_warning, run_identity
from ._sample_check import sample_strata
from ._sampling import Sample
from .reports import Figure, MethodRow, MethodTable, RunDifference, SystemScores, SystemTable


def _agreement(rows: Sequence[dict[str, Any]], other: Mapping[TurnKey, int]) -> float | None:
    """Judge verdicts against another rater's labels (turn key → 0/1), on the turns that
    rater labelled; dialogue ids join in any spelling."""
    labelled = [(r["verdict"], label) for r in rows
                if (label := other.get(row_key(r))) is not None]
    return agreement([v for v, _ in labelled], [bool(label) for _, label in labelled])


def _kappas(run: Run, human: Mapping[TurnKey, int] | None,
            boot: Bootstrap) -> dict[str, Figure]:
    """Cohen's kappa of the judge against each RULE version (and the humans), with its
    dialogue-clustered bootstrap interval."""
    ratings = read_ratings(run.rows)
    others = {v: labels for v, labels in ratings.rules.items()}
    if human is not None:
        others["human"] = {k: v for k, v in human.items()}
    out: dict[str, Figure] = {}
    for name, labels in others.items():
        pair = compare_raters("judge", ratings.judge, name, labels, ratings.order, boot,
                              name=f"{run.path} judge vs {name}")
        out[name] = pair["kappa"]
    return out


def method_table(runs: Sequence[Run],
                 human: Mapping[TurnKey, int] | None = None, *,
                 boot: Bootstrap | None = None) -> MethodTable:
    """One row per run: its system and predictions file, agreement and Cohen's kappa (with a
    bootstrap interval) against each RULE version (and humans), TSA, judge JGA, calls, tokens,
    errors. Runs must cover the same turns, so that the figures are comparable; ``differs_in``
    lists the aspects the runs differ in, and ``warning`` says so when there are several."""
    boot = boot or Bootstrap()
    if not runs:
        raise DataMismatchError("no runs to compare")
    reference = set(runs[0].turn_keys)
    for run in runs[1:]:
        if set(run.turn_keys) != reference:
            raise DataMismatchError(
                f"runs cover different turns ({len(run.rows)} vs {len(runs[0].rows)}); compare "
                "methods on the same dialogues", path=run.path)
    table: list[MethodRow] = []
    identities = [run_identity(run) for run in runs]
    for run, identity in zip(runs, identities, strict=True):
        s = run.summary
        versions = list(s.get("rule", {}))
        row: dict[str, Any] = {
            "run": str(run.path), "method": run.label, "model": s.get("options", {}).get("model"),
            "system": identity["system"], "predictions_file": identity["predictions_file"],
            "rule_match": s.get("rule_match"),
            "agreement": {v: s["rule"][v].get("agreement") for v in versions},
            "tsa": s.get("tsa"), "judge_jga": s.get("judge_jga"),
            "calls": s.get("calls", {}).get("planned"),
            "tokens": sum((s.get("tokens") or {}).get(k, 0)
                          for k in ("prompt_tokens", "completion_tokens")),
            "errors": s.get("error_turns"), "turns": s.get("turns"),
        }
        if human is not None:
            row["agreement"]["human"] = _agreement(run.rows, human)
        row["kappa"] = _kappas(run, human, boot)
        table.append(cast(MethodRow, row))
    differs = differing_aspects(identities)
    return {"turns": len(reference), "methods": table, "differs_in": differs,
            "warning": mixed_comparison_warning(differs)}


def sampled_run(runs: Sequence[Run], sample: Sample,
                predictions_sha256: Sequence[str | None] | None = None) -> int:
    """The position of the run the sample was drawn from: the first from which the sample
    file draws again (``predictions_sha256[i]``: the predictions run i judged, when known).
    None matching is an error naming why the first run does not."""
    first: DataMismatchError | None = None
    digests = list(predictions_sha256 or [None] * len(runs))
    for position, run in enumerate(runs):
        try:
            sample_strata(sample, run.rows, predictions_sha256=digests[position])
        except DataMismatchError as error:
            first = first or error
            continue
        return position
    assert first is not None
    raise first


def run_differences(runs: Sequence[Run], humans: Sequence[Mapping[TurnKey, int]],
                    sample: Sample, *, confidence: float = 0.95,
                    tuning: Tuning = "loo", drawn_from: int | None = None,
                    resolutions: Sequence[Resolution] | None = None
                    ) -> list[RunDifference]:
    """Every pair of runs (systems judged on the same dialogues, each labelled on the turns of
    one shared ``sample``; ``humans[i]`` are the labels of run i's predictions): judge,
    labels-only and PPI estimates of the TSA difference, and a verdict that names a better run
    only when the PPI interval of the difference excludes 0. Every pair uses the strata of the
    run the sample was drawn from (``drawn_from``, its position; default
    :func:`sampled_run`), so any number of runs works on a random or domain design (a
    judge-rule sample is refused: it cannot serve a difference). ``resolutions[i]`` say how
    run i's labels were reached (ties and unsure turns named, with bounds)."""
    if len(runs) < 2:
        raise DataMismatchError("a difference needs two runs")
    if len(humans) != len(runs):
        raise DataMismatchError(f"{len(humans)} labels file(s) for {len(runs)} runs: give one "
                                "per run (the labels of that run's predictions)")
    source = runs[sampled_run(runs, sample) if drawn_from is None else drawn_from].rows
    out: list[RunDifference] = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            a, b = str(runs[i].path), str(runs[j].path)
            result = sample_estimates(sample, [runs[i].rows, runs[j].rows],
                                      [humans[i], humans[j]], confidence=confidence,
                                      tuning=tuning, names=[a, b], drawn_from=source,
                                      resolutions=[resolutions[i], resolutions[j]]
                                      if resolutions else None)
            out.append({"a": a, "b": b, **result,
                        "verdict": difference_verdict(result["estimates"]["tsa"]["ppi"], a, b,
                                                      confidence)})
    return out


def difference_verdict(ppi: Mapping[str, Any], a: str, b: str, confidence: float) -> str:
    """"A is better than B" only when the PPI interval of A − B excludes 0."""
    ci = ppi.get("ci")
    level = f"{100 * confidence:g} %"
    if ci is None:
        return f"no verdict: the PPI estimate of {a} − {b} has no interval"
    if ci[0] > 0:
        return f"{a} is better than {b} (TSA; the {level} PPI interval of the difference " \
               "excludes 0)"
    if ci[1] < 0:
        return f"{b} is better than {a} (TSA; the {level} PPI interval of the difference " \
               "excludes 0)"
    return f"no difference shown between {a} and {b}: the {level} PPI interval of the TSA " \
           "difference includes 0"


def system_table(runs: Sequence[Run], schema: Schema, *,
                 names: Sequence[str] | None = None,
                 dialogues_path: str | Path | None = None,
                 corrections: Sequence[Located] = ()) -> SystemTable:
    """Per DST system: judge TSA and JGA next to RULE TSA and exact-match JGA per version,
    all on the dialogues the judge run covered. Data files are the ones each run recorded
    (``dialogues_path`` overrides the dialogues file, e.g. after moving the data). With
    ``corrections``, each corrected version (``2.1+corr:…``) is scored beside its original,
    its RULE TSA computed with the run's own RULE matching."""
    systems: list[SystemScores] = []
    loaded: dict[str, DialogueSet] = {}  # runs of several systems usually share one file
    for position, run in enumerate(runs):
        data = run.summary.get("data", {})
        source = dialogues_path or data.get("dialogues")
        if not source or not Path(source).exists():
            raise DataMismatchError(f"the dialogues file of this run ({source}) is not there; "
                                    "pass --dialogues", path=run.path)
        if str(source) not in loaded:
            loaded[str(source)] = load_dialogues(source)
        ids = list(dict.fromkeys(r["dialogue_id"] for r in run.rows))
        dialogues = loaded[str(source)].subset(ids)
        if not data.get("predictions") or not Path(data["predictions"]).exists():
            raise DataMismatchError(f"the predictions file of this run ({data.get('predictions')})"
                                    " is not there", path=run.path)
        predictions = load_predictions(data["predictions"], dialogues, schema)
        entry: SystemScores = {
            "system": names[position] if names else data.get("system", run.path.name),
            "run": str(run.path), "method": run.label,
            "tsa": {"judge": run.summary.get("tsa")},
            "jga": {"judge": run.summary.get("judge_jga")},
        }
        originals = dialogues.versions
        if corrections:
            dialogues, _ = apply_each(dialogues, corrections, schema=schema)
        for version in dialogues.versions:
            options = MetricOptions(breakdowns=False, rule_match=run.summary.get("rule_match"))
            report = compute_metrics(dialogues, predictions, schema, options, gold=version)
            figures = report.systems[0].metrics
            entry["tsa"][f"RULE-{version}"] = ((run.summary.get("rule", {}).get(version)
                                                or {}).get("tsa") if version in originals
                                               else figures["rule_tsa"].get(version))
            entry["jga"][f"RULE-{version}"] = figures["jga"]
        systems.append(entry)
    return {"systems": systems}


def systems_figure(table: Mapping[str, Any]) -> Any:
    """The matplotlib figure of :func:`plot_systems`: two panels (TSA, JGA), one bar group per
    system, one bar per evaluator, and the legend below the panels so it never covers a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = table["systems"]
    evaluators = list(systems[0]["tsa"])
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.4), sharey=True)
    width = 0.8 / len(evaluators)
    for axis, metric in zip(axes, ("tsa", "jga"), strict=True):
        for k, evaluator in enumerate(evaluators):
            values = [s[metric].get(evaluator) or 0.0 for s in systems]
            positions = [i + (k - (len(evaluators) - 1) / 2) * width for i in range(len(systems))]
            bars = axis.bar(positions, values, width, label=evaluator)
            axis.bar_label(bars, fmt="%.1f", fontsize=7)
        axis.set_xticks(range(len(systems)), [s["system"] for s in systems])
        axis.set_title("Turn state accuracy" if metric == "tsa" else "Joint goal accuracy")
        axis.set_ylim(0, 105)
        axis.set_ylabel("%")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(evaluators), fontsize=8,
                  frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    return figure


def plot_systems(table: SystemTable, path: str | Path) -> Path:
    """Write :func:`systems_figure` as a PNG."""
    import matplotlib.pyplot as plt

    figure = systems_figure(table)
    try:
        with open_output(path, "wb") as handle:
            figure.savefig(handle, dpi=120, format="png")
    finally:
        plt.close(figure)
    return Path(path)
