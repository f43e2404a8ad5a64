"""The shapes of the analysis reports that are JSON objects (what ``dst-judge agreement
--json``, ``compare --json``, ``labels plan --json``, ``leaderboard --json`` and the service's
analysis jobs write), as TypedDicts. :mod:`judge.analysis` exports the type of each
function's result; the blocks inside them (a rater pair, a figure, a table row) are named
here, for callers that annotate their own variables: a caller's ``report["turns"]``
is checked by mypy, while the report stays the plain dict the JSON outputs are dumped from
(nothing here changes a byte of them).

Keys present only with some options are ``NotRequired``; blocks whose keys are data (per
RULE version, per stratum) or that only echo inputs keep ``dict[str, Any]`` and are described
in the docstrings. No ``from __future__ import annotations`` here: with it, Python 3.11
would count every ``NotRequired`` key in ``__required_keys__``; without it the classes are
in dependency order and runtime checks see the right keys."""

from typing import Any, NotRequired, TypedDict


class _Corrected(TypedDict, total=False):
    corrections: list[dict[str, Any]]
    """When the run's rows were corrected (the service's agreement job with corrections):
    what each corrected version applied (``NotRequired`` is Python 3.11's)."""


class Figure(TypedDict):
    """A statistic with its interval: ``ci`` is ``[low, high]`` or None (no bootstrap, or too
    few units)."""

    value: float | None
    ci: list[float] | None


class Confusion(TypedDict):
    """A rater pair's 2×2 table: ``matrix[i][j]`` counts units rated ``labels[i]`` by
    ``rows`` and ``labels[j]`` by ``columns``."""

    rows: str
    columns: str
    labels: list[str]
    matrix: list[list[int]]


class _PairStatistics(TypedDict):
    accuracy: Figure
    kappa: Figure
    precision: Figure
    """Precision, recall and F1 of the ``incorrect`` class, ``b`` the reference."""
    recall: Figure
    f1: Figure
    ac1: Figure
    alpha: Figure
    pabak: Figure


class RaterPair(_PairStatistics):
    """One pair of raters in :class:`AgreementReport`'s ``pairs`` (the later the reference)."""

    name: str
    a: str
    b: str
    reference: str
    unit: str
    """``turn``, or ``slot`` for the judge against per-slot human labels."""
    n: int
    dialogues: int
    confusion: Confusion


class PopulationPair(_PairStatistics):
    """A rater against the humans, estimated for the whole run from the sample's labels."""

    name: str
    a: str
    b: str
    n: int


class ReviewerPair(TypedDict):
    """Two reviewers over the turns both labelled (point figures, no interval)."""

    a: str
    b: str
    n: int
    agreement: float | None
    kappa: float | None
    ac1: float | None
    alpha: float | None
    pabak: float | None


class InterAnnotator(TypedDict):
    """The reviewers' agreement over every label in the file (two or more reviewers)."""

    scope: str
    pairs: list[ReviewerPair]
    mean_kappa: float | None
    mean_agreement: float | None
    group: dict[str, Any]
    """All reviewers at once: ``reviewers``, ``turns``, ``dialogues`` and a figure each for
    ``agreement``, ``ac1``, ``alpha``, ``pabak``."""


class HumanSummary(TypedDict):
    """:class:`AgreementReport`'s ``human`` block: what the labels file holds and how it fits
    the run."""

    path: str | None
    labels: int
    annotators: list[str]
    turns: int
    tied_turns: int
    unsure: int
    slot_labels: int
    unknown: dict[str, Any]
    """Labels of turns the run does not hold: ``count`` and ``examples``."""
    inter_annotator: InterAnnotator | None
    undecided: NotRequired[dict[str, Any]]
    """Turns the reviewers split on (``tied``) or were all unsure of (``unsure``), and how
    many were ``adjudicated`` (always there in :func:`agreement_report`'s)."""


class LabelsTie(TypedDict):
    """Whether labels are tied to the predictions a run judged
    (:func:`judge.analysis.labels_tie`)."""

    tied: bool
    labels: int
    unnamed_labels: int
    predictions_sha256: str | None
    warning: str | None


EstimateFigure = TypedDict("EstimateFigure", {
    "value": float | None,
    "ci": list[float] | None,
    "n_labelled": int,
    "n_turns": int,
    "se": NotRequired[float | None],
    "df": NotRequired[float],
    "method": NotRequired[str],
    "note": NotRequired[str],
    "warning": NotRequired[str],
    "lambda": NotRequired[float],
    "tuning": NotRequired[str],
})
"""One estimate of a metric in points: ``se``, ``df`` and ``method`` when it could be
computed, ``lambda`` and ``tuning`` for PPI, a ``note`` when there is no interval (or, for the
judge's own figure, what it is), a ``warning`` on a small sample."""


class MetricEstimates(TypedDict):
    """The three estimates of one metric (a value of :class:`SampleEstimates`'
    ``estimates``)."""

    judge: EstimateFigure
    """The judge's own figure on the population (no interval)."""
    labels: EstimateFigure
    """The labels alone."""
    ppi: EstimateFigure
    """Prediction-powered: the labels and the judge's verdicts together."""


class SampleDesign(TypedDict):
    """A sample's design in a few fields (:meth:`judge.analysis.Sample.describe`)."""

    design: str
    unit: str
    gold: str | None
    allocation: str
    seed: int
    population: int
    drawn_units: int
    drawn_turns: int
    n: int
    procedure: int
    recorded: bool
    predictions_sha256: str | None


class SampleEstimates(TypedDict):
    """What :func:`judge.analysis.sample_estimates` returns: a run's metrics (or the
    difference of two runs) estimated from a sample file and its human labels."""

    design: SampleDesign
    """The sample's design in a few fields (:meth:`judge.analysis.Sample.describe`)."""
    confidence: float
    tuning: str | float
    difference: str | None
    """``"run 1 - run 2"`` for a difference of two runs, else ``None``."""
    estimates: dict[str, MetricEstimates]
    """Per metric (``tsa``; ``jga`` and ``success`` for a whole-dialogue sample), three
    figures: ``judge`` (the judge's own, no interval), ``labels`` (labels alone) and ``ppi``
    (prediction-powered), each ``{"value", "ci", "n_labelled", "n_turns", ...}`` in points."""
    left_out: dict[str, Any]
    """Labels of turns the sample does not list: ``count``, ``reason``, ``examples``."""
    unlabelled_sampled_turns: dict[str, Any]
    undecided_sampled_turns: dict[str, Any]
    assumptions: str


class PopulationReport(TypedDict):
    """:class:`AgreementReport`'s ``population`` block (a sample and its labels): the share
    of turns people judge correct and each rater's agreement with them, for the whole run."""

    sample: str | None
    sample_check: str
    gold: str | None
    population_turns: int
    sampled_turns: int
    labelled_turns: int
    uncovered_turns: int
    strata: list[dict[str, Any]]
    method: str
    human_correct: Figure
    pairs: list[PopulationPair]
    estimates: dict[str, MetricEstimates]
    estimation: dict[str, Any]
    """The rest of :class:`SampleEstimates` (all but ``estimates``)."""
    labels_tied: NotRequired[bool]


class AltReviewer(TypedDict):
    """One reviewer left out in :class:`AltTest`: the figures are there when the reviewer
    shares enough turns with the others, a ``note`` says why not otherwise."""

    reviewer: str
    shared_turns: int
    note: NotRequired[str]
    judge_agreement: NotRequired[Figure]
    reviewer_agreement: NotRequired[Figure]
    rho_judge: NotRequired[float]
    rho_reviewer: NotRequired[float]
    ties: NotRequired[float]
    judge_better: NotRequired[float]
    reviewer_better: NotRequired[float]
    z: NotRequired[float | None]
    p_value: NotRequired[float]
    rejected: NotRequired[bool]


class AltTest(TypedDict):
    """What :func:`judge.analysis.alt_test` returns (two or more reviewers)."""

    epsilon: float
    q: float
    correction: str
    minimum_shared_turns: int
    reviewers: list[AltReviewer]
    method: str
    rho_meaning: str
    enough_overlap: bool
    winning_rate: float | None
    """ω, the share of reviewers the judge wins against (None without enough overlap)."""
    average_advantage: float | None
    tested_reviewers: NotRequired[int]
    tie_share: NotRequired[float]
    passes: bool | None
    """None when there is no verdict (too few reviewers, or labels too unbalanced)."""
    verdict: str
    constant_judge: NotRequired[dict[str, Any]]
    """When a judge answering one label throughout would win as often: ``label``,
    ``label_share`` and its ``winning_rate``."""
    unbalanced: NotRequired[bool]


class BootstrapInfo(TypedDict):
    """How the intervals were resampled: whole dialogues, percentile intervals."""

    n_boot: int
    seed: int
    confidence: float
    unit: str
    method: str


class Reevaluation(TypedDict):
    """The paper's accuracy of the judge after human re-evaluation, against one RULE
    version: turns where judge and RULE agree count as right, the others as the human
    labels say (unlabelled ones as the judge's: ``assumption``)."""

    name: str
    version: str
    rule: str
    turns: int
    agreeing: int
    disagreeing: int
    disagreeing_labelled: int
    disagreeing_unlabelled: int
    disagreeing_tied: int
    human_matches_judge: int
    human_matches_rule: int
    agreeing_labelled: int
    agreeing_contradicted: int
    accuracy: Figure
    assumption: str


class AgreementReport(_Corrected):
    """What :func:`judge.analysis.agreement_report` returns.

    A *figure* is ``{"value": float | None, "ci": [low, high] | None}`` (percentages in
    points, coefficients as fractions)."""

    raters: list[str]
    """The raters compared: ``judge``, ``RULE-<version>`` for each version, ``human``."""
    labels: list[str]
    """The label order of every confusion table: ``incorrect``, ``correct``."""
    coefficients: list[str]
    """The chance-corrected coefficients each pair reports, in display order."""
    dialogues: int
    turns: int
    judged_turns: int
    error_turns: int
    """Turns without a judge verdict (a failed call)."""
    pairs: list[RaterPair]
    """One entry per pair of raters (and the judge against per-slot labels)."""
    human: HumanSummary | None
    """With human labels: what the file holds, how it fits the run, the reviewers'
    agreement (``inter_annotator``) and the undecided turns."""
    reevaluation: list[Reevaluation] | None
    """With human labels: the judge's accuracy after human re-evaluation, per RULE version."""
    population: PopulationReport | None
    """With a sample and labels: the population estimates."""
    labels_tie: LabelsTie | None
    """Whether the labels are tied to the run's predictions."""
    population_note: str | None
    alt_test: AltTest | None
    """With two or more reviewers: the alternative-annotator test of the judge."""
    bootstrap: BootstrapInfo


class RunDifference(SampleEstimates):
    """One pair of runs in :func:`judge.analysis.run_differences`: the estimates of
    ``a`` − ``b`` and a verdict that names a better run only when the PPI interval of the TSA
    difference excludes 0."""

    a: str
    b: str
    verdict: str
    labels_tied: NotRequired[bool]
    """Added by ``dst-judge compare`` with labels."""


class MethodRow(TypedDict):
    """One run in :func:`judge.analysis.method_table` (figures as the run's summary holds
    them, None when it has none)."""

    run: str
    method: str
    model: str | None
    system: str | None
    predictions_file: str | None
    rule_match: str | None
    agreement: dict[str, float | None]
    """Percent agreement with each RULE version (and ``human``)."""
    tsa: float | None
    judge_jga: float | None
    calls: int | None
    tokens: int
    errors: int | None
    turns: int | None
    kappa: dict[str, Figure]
    """Cohen's kappa against each RULE version (and ``human``)."""


class MethodTable(TypedDict):
    """What :func:`judge.analysis.method_table` returns."""

    turns: int
    methods: list[MethodRow]
    differs_in: list[str]
    """The aspects the runs differ in (system, predictions, model, prompt, ...)."""
    warning: str | None
    """When the runs differ in several aspects."""
    labels_pairing: NotRequired[str]
    labels_tie: NotRequired[list[LabelsTie]]
    labels_tied: NotRequired[bool]
    sample_check: NotRequired[str | None]
    differences: NotRequired[list[RunDifference]]
    """``dst-judge compare`` and the service's compare job add these: how labels files
    were paired with the runs and whether they are tied to them; with a sample, its check
    and :func:`judge.analysis.run_differences`."""


class SystemScores(TypedDict):
    """One system in :func:`judge.analysis.system_table`: TSA and JGA by evaluator
    (``judge``, ``RULE-<version>`` for each, corrected, version)."""

    system: str
    run: str
    method: str
    tsa: dict[str, float | None]
    jga: dict[str, float | None]


class SystemTable(TypedDict):
    """What :func:`judge.analysis.system_table` returns."""

    systems: list[SystemScores]


class PlannedSize(TypedDict):
    """Labels needed by one estimator in a :class:`LabelPlan`, widths in points."""

    labels_needed: int
    median_width: float
    width_at_share: float


class LabelPlan(TypedDict):
    """What :func:`judge.analysis.plan_labels` returns."""

    width: float
    confidence: float
    population: int
    judge_tsa: float
    criterion: str
    share: float
    minimum: int
    basis: dict[str, Any]
    """The assumed ``disagreement``, or the ``pilot`` the cells were estimated from."""
    note: NotRequired[str]
    """When the run is too small to sample: label every turn."""
    labels: PlannedSize
    ppi: PlannedSize


class LabelledFigure(TypedDict):
    value: float | None
    ci: list[float] | None
    n_labelled: int | None


class LabelledSystem(TypedDict):
    name: str
    tsa: LabelledFigure
    """Prediction-powered."""
    labels_only: LabelledFigure
    judge: LabelledFigure
    warning: str | None


class LabelledPair(TypedDict):
    a: str
    b: str
    metric: str
    difference: float | None
    ci: list[float] | None
    significant: bool
    verdict: str


class LabelledTsa(TypedDict):
    """What :func:`judge.analysis.labelled_tsa` returns (a leaderboard's ``labelled``
    block)."""

    method: str
    confidence: float
    tuning: str | float
    sample: str
    sample_check: str
    labels_pairing: str | None
    systems: list[LabelledSystem]
    pairs: list[LabelledPair]


PpiMean = TypedDict("PpiMean", {
    "value": float,
    "ci": list[float],
    "se": float,
    "lambda": float,
    "n_labelled": int,
    "n_unlabelled": int,
})
"""What :func:`judge.analysis.ppi_mean` returns (the reference PPI++ of a mean)."""


class BoardFigure(TypedDict):
    """A leaderboard figure in points: ``ci`` is ``[low, high]`` (either None when not
    finite)."""

    value: float | None
    ci: list[float | None]
    se: float | None


class BoardSystem(TypedDict):
    name: str
    kind: str
    """``predictions`` or ``run`` (a judge run)."""
    source: str
    metrics: dict[str, BoardFigure]
    rank: int
    rank_ci: list[int]
    group: str
    """Letters of the groups it belongs to (systems sharing a letter are not told apart)."""


class BoardPair(TypedDict):
    """``a - b`` (a the system with the higher value), paired by dialogue."""

    a: str
    b: str
    metric: str
    difference: float | None
    ci: list[float | None]
    se: float | None
    p: float | None
    p_adjusted: float | None
    significant: bool


class BoardBreakdown(TypedDict):
    dimension: str
    group: str
    metric: str
    dialogues: int
    turns: int
    systems: dict[str, BoardFigure]


class LeaderboardJson(_Corrected):
    """What :meth:`judge.analysis.Leaderboard.to_json` returns (``dst-judge leaderboard
    --json``; the service's leaderboard job adds ``corrections``)."""

    systems: list[BoardSystem]
    pairs: list[BoardPair]
    groups: list[list[str]]
    """The systems of each group that cannot be told apart, in rank order."""
    breakdowns: list[BoardBreakdown]
    method: dict[str, Any]
    labelled: NotRequired[LabelledTsa]


__all__ = [
    "AgreementReport",
    "AltReviewer",
    "AltTest",
    "BoardBreakdown",
    "BoardFigure",
    "BoardPair",
    "BoardSystem",
    "BootstrapInfo",
    "Confusion",
    "EstimateFigure",
    "Figure",
    "HumanSummary",
    "InterAnnotator",
    "LabelPlan",
    "LabelledFigure",
    "LabelledPair",
    "LabelledSystem",
    "LabelledTsa",
    "LabelsTie",
    "LeaderboardJson",
    "MethodRow",
    "MethodTable",
    "MetricEstimates",
    "PlannedSize",
    "PopulationPair",
    "PopulationReport",
    "PpiMean",
    "RaterPair",
    "Reevaluation",
    "ReviewerPair",
    "RunDifference",
    "SampleDesign",
    "SampleEstimates",
    "SystemScores",
    "SystemTable",
]
