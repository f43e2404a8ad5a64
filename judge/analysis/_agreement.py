"""Agreement between the judge, the exact-match RULE verdicts and human labels.

Every rater gives each turn a label, 1 = the predicted turn state is correct and 0 = incorrect.
Each pair of raters gets raw agreement, the chance-corrected coefficients of ``_statistics``
(Cohen's kappa, Gwet's AC1, Krippendorff's alpha, PABAK) and precision/recall/F1 of the
"incorrect" class. Confidence intervals come from a percentile bootstrap that resamples
*dialogues*, because the turns of one dialogue share a context and a cumulative state, so they
are not independent draws (METHOD.md §6). With a stratified sample (``labels sample``) the
human labels also give *population* estimates: each labelled turn stands for ``N_h / n_h``
turns of its stratum. A statistic that is undefined on the data (say kappa when both raters
give every turn the same label) is ``None``, never NaN.

The raters are read from the rows in ``_ratings``, statistics from counts and the bootstrap
in ``_pair_counts``; the report's table rows are built in ``_agreement_tables``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from .._errors import OptionError
from ._alttest import EPSILON, alt_test
from ._design import Tuning
from ._estimates import sample_estimates
from ._labels import (
    UNNAMED,
    HumanLabel,
    HumanLabels,
    Resolution,
    TurnKey,
    labels_tie,
    load_labels,
)
from ._pair_counts import (
    LABEL_NAMES,
    PAIR_STATISTICS,
    Bootstrap,
    _optional,
    statistics_from_counts,
)
from ._ratings import Ratings, RowsSource, read_ratings
from ._sample_check import check_sample
from ._sampling import Sample
from ._statistics import (
    COEFFICIENTS,
    cluster_bootstrap,
    cohen_kappa,
    group_statistics,
    group_vectors,
    krippendorff_alpha,
    resample_dialogues,
    stratified_bootstrap,
    unit_counts,
)
from .reports import (
    AgreementReport,
    AltTest,
    HumanSummary,
    InterAnnotator,
    LabelsTie,
    PopulationReport,
    RaterPair,
    Reevaluation,
    ReviewerPair,
)

__all__ = [  # the labels live in ._labels; these names stay importable from here
    "UNNAMED", "HumanLabel", "HumanLabels", "TurnKey", "agreement_report", "load_labels",
    "resample_dialogues", "statistics_from_counts",
]

_MAX_EXAMPLES = 20

REEVALUATION_ASSUMPTION = (
    "Humans labelled only the turns where the judge and RULE-{version} disagree. Turns where "
    "they agree are counted as correct judgments without human review; disagreeing turns count "
    "as correct only when the human label equals the judge verdict, and disagreeing turns "
    "without a (majority) human label count as not matching."
)
REEVALUATION_NOTE = (
    "Each row assumes humans labelled only the turns where the judge and that row's RULE "
    "version disagree: turns where they agree count as correct judgments without human review, "
    "and disagreeing turns without a (majority) human label count as not matching. This "
    "over-states accuracy whenever judge and RULE are wrong together; a stratified sample "
    "(dst-judge labels sample, then agreement --sample) measures it instead."
)


_bootstrap = cluster_bootstrap  # the name older tests use


# --------------------------------------------------------------------------- step 2: pairs


def _confusion(a: Sequence[int], b: Sequence[int]) -> np.ndarray:
    """``matrix[x, y]``: units rater a labelled x and rater b labelled y (0 = incorrect)."""
    matrix = np.zeros((2, 2), dtype=np.int64)
    for x, y in zip(a, b, strict=True):
        matrix[x, y] += 1
    return matrix


def _point_estimates(a: Sequence[int], b: Sequence[int]) -> dict[str, float | None]:
    """Every pair statistic on the units both raters labelled (b is the reference)."""
    if not a:
        return dict.fromkeys(PAIR_STATISTICS)
    closed = statistics_from_counts(_confusion(a, b).reshape(4))
    return {
        "accuracy": 100.0 * sum(x == y for x, y in zip(a, b, strict=True)) / len(a),
        "kappa": cohen_kappa(a, b),
        "precision": _optional(closed["precision"]),
        "recall": _optional(closed["recall"]),
        "f1": _optional(closed["f1"]),
        "ac1": _optional(closed["ac1"]),
        "alpha": krippendorff_alpha(list(zip(a, b, strict=True))),
        "pabak": _optional(closed["pabak"]),
    }


def compare_raters(name_a: str, labels_a: Mapping[Any, int], name_b: str,
                   labels_b: Mapping[Any, int], order: Sequence[Any], boot: Bootstrap, *,
                   unit: str = "turn", name: str | None = None) -> RaterPair:
    """Every statistic of one rater pair over the units both labelled; b is the reference.

    Units are turn keys or slot keys; either way their first element is the dialogue, which is
    what the bootstrap resamples.
    """
    keys = [k for k in order if k in labels_a and k in labels_b]
    a = [labels_a[k] for k in keys]
    b = [labels_b[k] for k in keys]
    dialogues = list(dict.fromkeys(k[0] for k in keys))
    entry: dict[str, Any] = {
        "name": name or f"{name_a} vs {name_b}", "a": name_a, "b": name_b, "reference": name_b,
        "unit": unit, "n": len(keys), "dialogues": len(dialogues),
    }
    points = _point_estimates(a, b)
    intervals: dict[str, list[float] | None] = dict.fromkeys(PAIR_STATISTICS)
    if keys and boot.n_boot > 0:
        index = {d: i for i, d in enumerate(dialogues)}
        per_dialogue = np.zeros((len(dialogues), 4), dtype=np.int64)
        for k, x, y in zip(keys, a, b, strict=True):
            per_dialogue[index[k[0]], 2 * x + y] += 1
        replicates = statistics_from_counts(
            cluster_bootstrap(per_dialogue, boot.n_boot, boot.rng(entry["name"])))
        intervals = {s: boot.interval(replicates[s]) for s in PAIR_STATISTICS}
    for statistic in PAIR_STATISTICS:
        entry[statistic] = {"value": points[statistic], "ci": intervals[statistic]}
    matrix = _confusion(a, b)
    entry["confusion"] = {"rows": name_a, "columns": name_b, "labels": list(LABEL_NAMES),
                          "matrix": [[int(v) for v in row] for row in matrix]}
    return cast(RaterPair, entry)


def _compare(name_a: str, labels_a: Mapping[TurnKey, int], name_b: str,
             labels_b: Mapping[TurnKey, int], order: Sequence[TurnKey], *, n_boot: int,
             seed: int, confidence: float) -> RaterPair:
    """One turn-level rater pair (the older signature of :func:`compare_raters`)."""
    return compare_raters(name_a, labels_a, name_b, labels_b, order,
                          Bootstrap(n_boot, seed, confidence))


def pairwise(raters: Mapping[str, Mapping[TurnKey, int]], order: Sequence[TurnKey],
             boot: Bootstrap) -> list[RaterPair]:
    """Step 2: every pair of raters, the later one as reference."""
    names = list(raters)
    return [compare_raters(x, raters[x], y, raters[y], order, boot)
            for x, y in itertools.combinations(names, 2)]


def slot_pair(ratings: Ratings, human: HumanLabels, seen: set[TurnKey],
              boot: Bootstrap) -> RaterPair | None:
    """The judge against the human per-slot labels (None when no slot is labelled)."""
    slots = {k: v for k, v in human.per_slot().items() if k[:2] in seen}
    if not slots:
        return None
    judge = {k: v for k in slots if (v := ratings.judge_slot(k)) is not None}
    return compare_raters("judge", judge, "human", slots, list(slots), boot, unit="slot",
                          name="judge vs human (slots)")


# --------------------------------------------------------------------------- step 3: humans


def _reviewer_group(labels: Mapping[str, Mapping[TurnKey, int]],
                    boot: Bootstrap) -> dict[str, Any]:
    """Agreement of all reviewers at once (any number, missing labels allowed): percent
    agreement, AC1, alpha and PABAK over the turns at least two of them labelled."""
    names = list(labels)
    keys = list(dict.fromkeys(k for name in names for k in labels[name]))
    ratings = [[labels[name].get(k) for name in names] for k in keys]
    vectors = group_vectors(unit_counts(ratings, (0, 1)))
    points = group_statistics(vectors.sum(axis=0), 2)
    pairable = int(vectors[:, 1].sum())
    out: dict[str, Any] = {"reviewers": names, "turns": pairable,
                           "dialogues": len({k[0] for k, v in zip(keys, vectors, strict=True)
                                             if v[1]})}
    values = {"agreement": _optional(100.0 * points["agreement"]),
              "ac1": _optional(points["ac1"]), "alpha": krippendorff_alpha(ratings),
              "pabak": _optional(points["pabak"])}
    intervals: dict[str, list[float] | None] = dict.fromkeys(values)
    if pairable and boot.n_boot > 0:
        dialogues = list(dict.fromkeys(k[0] for k in keys))
        index = {d: i for i, d in enumerate(dialogues)}
        per_dialogue = np.zeros((len(dialogues), vectors.shape[1]))
        for k, vector in zip(keys, vectors, strict=True):
            per_dialogue[index[k[0]]] += vector
        replicates = group_statistics(
            cluster_bootstrap(per_dialogue, boot.n_boot, boot.rng("reviewers")), 2)
        replicates["agreement"] = 100.0 * replicates["agreement"]
        intervals = {s: boot.interval(replicates[s]) for s in values}
    for statistic, value in values.items():
        out[statistic] = {"value": value, "ci": intervals[statistic]}
    return out


def inter_annotator(human: HumanLabels, boot: Bootstrap | None = None
                    ) -> InterAnnotator | None:
    """Step 3: agreement between the reviewers, over all labels in the file: each pair
    (percent agreement, kappa, AC1, alpha, PABAK) and the whole group with intervals."""
    if len(human.annotators) < 2:
        return None
    boot = boot or Bootstrap(n_boot=0)
    labels = human.by_annotator()
    pairs: list[ReviewerPair] = []
    for x, y in itertools.combinations(human.annotators, 2):
        both = [k for k in labels[x] if k in labels[y]]
        a = [labels[x][k] for k in both]
        b = [labels[y][k] for k in both]
        points = _point_estimates(a, b)
        pairs.append({
            "a": x, "b": y, "n": len(both), "agreement": points["accuracy"],
            "kappa": points["kappa"], "ac1": points["ac1"], "alpha": points["alpha"],
            "pabak": points["pabak"],
        })
    kappas = [k for p in pairs if (k := p["kappa"]) is not None]
    agreements = [g for p in pairs if (g := p["agreement"]) is not None]
    return {
        "scope": "all labels in the file, including turns the run does not hold",
        "pairs": pairs,
        "mean_kappa": float(np.mean(kappas)) if kappas else None,
        "mean_agreement": float(np.mean(agreements)) if agreements else None,
        "group": _reviewer_group(labels, boot),
    }


def _inter_annotator(human: HumanLabels) -> InterAnnotator | None:
    return inter_annotator(human)


def human_summary(human: HumanLabels, rows: Sequence[Mapping[str, Any]],
                  majority: Mapping[TurnKey, int], seen: set[TurnKey],
                  boot: Bootstrap) -> HumanSummary:
    """What the labels file holds and how it fits the run."""
    unknown = human._unknown_indices(rows)
    return {
        "path": human.path, "labels": len(human.records),
        "annotators": list(human.annotators),
        "turns": len(majority), "tied_turns": len(set(human.tied_turns()) & seen),
        "unsure": human.unsure_turns,
        "slot_labels": sum(len(r.slots or {}) for r in human.records),
        "unknown": {"count": len(unknown), "examples": [
            {"line": human.line_of(i), "dialogue_id": human.records[i].dialogue_id,
             "turn_index": human.records[i].turn_index,
             "annotator": human.records[i].annotator_name}
            for i in unknown[:_MAX_EXAMPLES]]},
        "inter_annotator": inter_annotator(human, boot),
    }


def reevaluation(version: str, judge: Mapping[TurnKey, int], rule: Mapping[TurnKey, int],
                 human: Mapping[TurnKey, int], tied: set[TurnKey], order: Sequence[TurnKey],
                 boot: Bootstrap) -> Reevaluation:
    """The paper's "accuracy after human re-evaluation" of the judge against one RULE version."""
    keys = [k for k in order if k in judge and k in rule]
    agreeing = [k for k in keys if judge[k] == rule[k]]
    disagreeing = [k for k in keys if judge[k] != rule[k]]
    labelled = [k for k in disagreeing if k in human]
    matches = [k for k in labelled if human[k] == judge[k]]
    hits = set(agreeing) | set(matches)
    entry: Reevaluation = {
        "name": f"judge vs RULE-{version}", "version": version, "rule": f"RULE-{version}",
        "turns": len(keys), "agreeing": len(agreeing), "disagreeing": len(disagreeing),
        "disagreeing_labelled": len(labelled),
        "disagreeing_unlabelled": len(disagreeing) - len(labelled),
        "disagreeing_tied": sum(k in tied for k in disagreeing),
        "human_matches_judge": len(matches),
        "human_matches_rule": len(labelled) - len(matches),
        "agreeing_labelled": sum(k in human for k in agreeing),
        "agreeing_contradicted": sum(k in human and human[k] != judge[k] for k in agreeing),
        "accuracy": {"value": 100.0 * len(hits) / len(keys) if keys else None, "ci": None},
        "assumption": REEVALUATION_ASSUMPTION.format(version=version),
    }
    if keys and boot.n_boot > 0:
        dialogues = list(dict.fromkeys(k[0] for k in keys))
        index = {d: i for i, d in enumerate(dialogues)}
        per_dialogue = np.zeros((len(dialogues), 2), dtype=np.int64)
        for k in keys:
            per_dialogue[index[k[0]], 0] += k in hits
            per_dialogue[index[k[0]], 1] += 1
        sums = cluster_bootstrap(per_dialogue, boot.n_boot, boot.rng(f"reevaluation {version}"))
        entry["accuracy"]["ci"] = boot.interval(100.0 * sums[:, 0] / sums[:, 1])
    return entry


# --------------------------------------------------------------------------- step 4: sample


def population_estimates(sample: Sample, rows: Sequence[Mapping[str, Any]],
                         raters: Mapping[str, Mapping[TurnKey, int]],
                         human: Mapping[TurnKey, int], boot: Bootstrap,
                         tuning: Tuning = "loo", *, predictions_sha256: str | None = None,
                         resolution: Resolution | None = None) -> PopulationReport:
    """Step 4: population figures from the human labels of a stratified sample.

    A labelled turn of stratum h weighs ``N_h / m_h`` (m_h = labelled turns of h; sampled turns
    left unlabelled are treated as missing at random within their stratum). Weighted sums
    estimate: the share of turns whose predicted state is correct by human judgment (the TSA a
    person would give), and every rater's agreement with the humans (a weighted confusion
    table, hence accuracy, kappa, AC1, alpha, PABAK, incorrect-class P/R/F1). Intervals come
    from a stratified bootstrap of the labelled turns. Strata without any label cannot be
    estimated; their turns are reported as not covered.

    ``estimates`` holds the metric estimates side by side (``judge``, ``labels``, ``ppi``, see
    :func:`judge.analysis.sample_estimates`), with their Student-t intervals.
    """
    checked = check_sample(sample, rows, predictions_sha256=predictions_sha256)
    estimation = sample_estimates(sample, [rows], [human], confidence=boot.confidence,
                                  tuning=tuning,
                                  resolutions=[resolution] if resolution is not None else None)
    strata = sample.strata()
    labelled = [t for t in sample.turns if t.key in human]
    counts = {h: len({t.unit_key for t in labelled if t.stratum == h}) for h in strata}
    weights = np.array([strata[t.stratum]["size"] / counts[t.stratum] for t in labelled])
    stratum_of = [t.stratum for t in labelled]
    uncovered = sum(s["size"] for h, s in strata.items() if counts[h] == 0)
    block: dict[str, Any] = {
        "sample": sample.path, "sample_check": checked, "gold": sample.gold,
        "population_turns": sample.population,
        "sampled_turns": len(sample.turns), "labelled_turns": len(labelled),
        "uncovered_turns": uncovered,
        "strata": [{**s, "labelled": counts[h]} for h, s in sorted(strata.items())],
        "method": "stratified (Horvitz-Thompson weights N_h/n_h over the labelled turns); "
                  "percentile intervals from a stratified bootstrap of the labelled turns",
    }
    correct = np.array([[human[t.key]] for t in labelled], dtype=float)
    value = _optional(100.0 * (weights @ correct[:, 0]) / weights.sum()) if labelled else None
    ci = None
    if labelled and boot.n_boot > 0:
        sums = stratified_bootstrap(np.hstack([correct, np.ones_like(correct)]), stratum_of,
                                    weights, boot.n_boot, boot.rng("population correct"))
        ci = boot.interval(100.0 * sums[:, 0] / sums[:, 1])
    block["human_correct"] = {"value": value, "ci": ci}
    estimates = []
    for name, labels in raters.items():
        if name == "human":
            continue
        usable = [i for i, t in enumerate(labelled) if t.key in labels]
        cells = np.zeros((len(usable), 4))
        for row, i in enumerate(usable):
            cells[row, 2 * labels[labelled[i].key] + human[labelled[i].key]] = 1
        w = weights[usable]
        entry: dict[str, Any] = {"name": f"{name} vs human", "a": name, "b": "human",
                                 "n": len(usable)}
        points = statistics_from_counts(w @ cells) if usable else {}
        intervals: dict[str, Any] = dict.fromkeys(PAIR_STATISTICS)
        if usable and boot.n_boot > 0:
            sums = stratified_bootstrap(cells, [stratum_of[i] for i in usable], w, boot.n_boot,
                                        boot.rng(f"population {name}"))
            replicates = statistics_from_counts(sums)
            intervals = {s: boot.interval(replicates[s]) for s in PAIR_STATISTICS}
        for statistic in PAIR_STATISTICS:
            entry[statistic] = {"value": _optional(points[statistic]) if usable else None,
                                "ci": intervals[statistic]}
        estimates.append(entry)
    block["pairs"] = estimates
    block["estimates"] = estimation["estimates"]
    block["estimation"] = {k: v for k, v in estimation.items() if k != "estimates"}
    return cast(PopulationReport, block)


# --------------------------------------------------------------------------- the report


NO_SAMPLE_NOTE = (
    "no population estimate: labels collected without a sample file (review queues, "
    "hand-picked turns) are not a random sample of the run, so they give agreement figures "
    "only; draw one with 'dst-judge labels sample' and pass it with --sample")


def agreement_report(rows: list[dict[str, Any]], human: HumanLabels | None = None, *,
                     sample: Sample | None = None, n_boot: int = 1000, seed: int = 0,
                     confidence: float = 0.95, source: RowsSource | None = None,
                     tuning: Tuning = "loo", predictions_sha256: str | None = None,
                     adjudicator: str | None = None, run_name: str = "the run",
                     epsilon: float = EPSILON) -> AgreementReport:
    """Agreement of every pair of raters (judge, each RULE version, humans) on a judge run.

    ``rows`` are the lines of ``judgments.jsonl``. In each pair ``(a, b)`` the later rater is
    the reference for precision, recall and F1 of the "incorrect" class (order: judge, RULE
    versions as they appear, human). With human labels the report also holds the reviewers'
    agreement, the judge against per-slot labels, and the paper's accuracy after human
    re-evaluation; with a ``sample`` (and labels) it adds population estimates. ``source``
    (see :func:`judgment_rows_source`) lets a bad row be named by file and line.

    ``predictions_sha256`` is the predictions file the run judged, when known: labels and a
    sample that name other predictions are refused, and ``labels_tie`` says whether the
    labels are tied to it (:func:`judge.analysis.labels_tie`: a warning, and the figures
    marked, when a label names no predictions or the run's are unknown). A sample is drawn
    again from ``rows`` and refused unless it comes out the same (:func:`check_sample`).
    ``adjudicator`` names the reviewer whose label decides turns the others split on. With
    two or more reviewers ``alt_test`` holds the alternative-annotator test of the judge
    against them at ``epsilon`` (:func:`judge.analysis.alt_test`).
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) \
            or not 0 <= epsilon < 1:
        raise OptionError(f"epsilon must be a number in [0, 1) (got {epsilon!r})")
    boot = Bootstrap(n_boot, seed, confidence)
    ratings = read_ratings(rows, source)
    raters = ratings.raters()
    seen = set(ratings.order)
    human_block: HumanSummary | None = None
    reevaluations: list[Reevaluation] | None = None
    slot_entry: RaterPair | None = None
    majority: dict[TurnKey, int] = {}
    resolution: Resolution | None = None
    alternative: AltTest | None = None
    tie: LabelsTie | None = None
    if human is not None:
        human.check_predictions(predictions_sha256, run=run_name)
        tie = labels_tie(human, predictions_sha256, run=run_name)
        resolution = human.resolve(adjudicator)
        majority = {k: v for k, v in resolution.labels.items() if k in seen}
        raters["human"] = majority
        human_block = human_summary(human, rows, majority, seen, boot)
        human_block["undecided"] = _undecided_turns(resolution, seen, human)
        tied = set(resolution.tied)
        reevaluations = [reevaluation(v, ratings.judge, labels, majority, tied, ratings.order,
                                      boot) for v, labels in ratings.rules.items()]
        slot_entry = slot_pair(ratings, human, seen, boot)
        reviewers = {name: {k: v for k, v in labels.items() if k in seen}
                     for name, labels in human.by_annotator().items()}
        alternative = alt_test(ratings.judge, reviewers, epsilon=float(epsilon),
                               n_boot=boot.n_boot, confidence=boot.confidence,
                               seed=seed)
    if sample is not None and human is None:
        raise OptionError("population estimates need human labels of the sampled turns")
    pairs = pairwise(raters, ratings.order, boot)
    if slot_entry is not None:
        pairs.append(slot_entry)
    population = (population_estimates(sample, rows, raters, majority, boot, tuning,
                                       predictions_sha256=predictions_sha256,
                                       resolution=resolution)
                  if sample is not None else None)
    if population is not None and tie is not None:
        population["labels_tied"] = tie["tied"]
    return {
        "raters": list(raters),
        "labels": list(LABEL_NAMES),
        "coefficients": list(COEFFICIENTS),
        "dialogues": len(dict.fromkeys(k[0] for k in ratings.order)),
        "turns": len(ratings.order),
        "judged_turns": len(ratings.judge),
        "error_turns": len(ratings.order) - len(ratings.judge),
        "pairs": pairs,
        "human": human_block,
        "reevaluation": reevaluations,
        "population": population,
        "labels_tie": tie,
        "population_note": NO_SAMPLE_NOTE if sample is None and human is not None else None,
        "alt_test": alternative,
        "bootstrap": boot.describe(),
    }


def _undecided_turns(resolution: Resolution, seen: set[TurnKey],
                     human: HumanLabels) -> dict[str, Any]:
    """Turns of the run the reviewers split on or were all unsure of, and how the others'
    labels were reached."""
    spelled = {r.key: r.dialogue_id for r in human.records}
    out: dict[str, Any] = {}
    for kind, keys in (("tied", resolution.tied), ("unsure", resolution.unsure)):
        mine = [k for k in keys if k in seen]
        out[kind] = {"count": len(mine), "examples": [
            {"dialogue_id": spelled[k], "turn_index": k[1]} for k in mine[:_MAX_EXAMPLES]]}
    out["adjudicated"] = sum(1 for k, how in resolution.how.items()
                             if how == "adjudicated" and k in seen)
    return out
