"""What to make of runs: human labels, agreement statistics, sampling for labels, comparisons,
the audit page and ranked label-error candidates.

What the CLI and the web print of these (table headers, row formatters, the leaderboard's
text formats) is in :mod:`judge.analysis.tables`, outside this face. The reports that are
JSON objects are TypedDicts: the type of each function's result is here, the blocks inside
them in :mod:`judge.analysis.reports`."""

from ._agreement import agreement_report
from ._alttest import alt_test, benjamini_yekutieli
from ._audit import (
    AuditItem,
    audit_items,
    render_audit,
    write_audit,
)
from ._audit_decisions import import_decisions
from ._audit_inputs import (
    AuditSource,
    load_audit_inputs,
    recorded_input,
    source_from_predictions,
    source_from_run,
)
from ._audit_stream import stream_candidates
from ._candidate_sheet import write_candidates
from ._candidates import (
    Candidate,
    Evidence,
    base_version,
    candidate_id,
    find_candidates,
)
from ._clustered import (
    Clustered,
    Interval,
    adjust,
    difference,
    interval,
    jackknife_estimate,
    ratio_estimate,
)
from ._compare import (
    method_table,
    plot_systems,
    run_differences,
    sampled_run,
    system_table,
    systems_figure,
)
from ._decided import (
    audit_gold,
    corrections_from_candidates,
    open_candidates,
    queue_records,
)
from ._design import (
    CORNERS,
    DIFFERENCE_CORNERS,
    DIFFERENCE_PSEUDO_UNITS,
    MIN_TURNS,
    PSEUDO_UNITS,
    TUNINGS,
    DesignEstimate,
    Stratum,
    check_tuning,
    design_estimate,
    ppi_mean,
)
from ._estimates import JUDGE_NOTE, sample_estimates
from ._labels import (
    HumanLabel,
    HumanLabels,
    Resolution,
    SlotLabel,
    labels_tie,
    load_labels,
    pair_by_predictions,
    write_labels,
)
from ._leaderboard import (
    Leaderboard,
    build_leaderboard,
)
from ._leaderboard_labels import labelled_tsa
from ._leaderboard_out import (
    plot_leaderboard,
    write_turns,
)
from ._leaderboard_systems import (
    Layout,
    SeenValues,
    SystemTurns,
    load_seen,
    score_predictions,
    score_run,
    stream_predictions,
)
from ._planning import labels_needed, plan_labels
from ._ratings import judgment_rows_source
from ._review import error_chance, fix_span, review_order
from ._runinfo import recorded_predictions_sha256
from ._sample_check import check_sample
from ._sampling import (
    ALLOCATIONS,
    DESIGNS,
    UNITS,
    Sample,
    SampledTurn,
    Strata,
    allocate,
    design_strata,
    draw_sample,
    load_sample,
    run_turns_digest,
    write_sample,
)
from ._statistics import (
    cohen_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
)
from .reports import (
    AgreementReport,
    AltTest,
    LabelledTsa,
    LabelPlan,
    LabelsTie,
    LeaderboardJson,
    MethodTable,
    PpiMean,
    RunDifference,
    SampleDesign,
    SampleEstimates,
    SystemTable,
)

__all__ = [
    "ALLOCATIONS",
    "CORNERS",
    "DESIGNS",
    "DIFFERENCE_CORNERS",
    "DIFFERENCE_PSEUDO_UNITS",
    "JUDGE_NOTE",
    "MIN_TURNS",
    "PSEUDO_UNITS",
    "TUNINGS",
    "UNITS",
    "AgreementReport",
    "AltTest",
    "AuditItem",
    "AuditSource",
    "Candidate",
    "Clustered",
    "DesignEstimate",
    "Evidence",
    "HumanLabel",
    "HumanLabels",
    "Interval",
    "LabelPlan",
    "LabelledTsa",
    "LabelsTie",
    "Layout",
    "Leaderboard",
    "LeaderboardJson",
    "MethodTable",
    "PpiMean",
    "Resolution",
    "RunDifference",
    "Sample",
    "SampleDesign",
    "SampleEstimates",
    "SampledTurn",
    "SeenValues",
    "SlotLabel",
    "Strata",
    "Stratum",
    "SystemTable",
    "SystemTurns",
    "adjust",
    "agreement_report",
    "allocate",
    "alt_test",
    "audit_gold",
    "audit_items",
    "base_version",
    "benjamini_yekutieli",
    "build_leaderboard",
    "candidate_id",
    "check_sample",
    "check_tuning",
    "cohen_kappa",
    "corrections_from_candidates",
    "design_estimate",
    "design_strata",
    "difference",
    "draw_sample",
    "error_chance",
    "find_candidates",
    "fix_span",
    "gwet_ac1",
    "import_decisions",
    "interval",
    "jackknife_estimate",
    "judgment_rows_source",
    "krippendorff_alpha",
    "labelled_tsa",
    "labels_needed",
    "labels_tie",
    "load_audit_inputs",
    "load_labels",
    "load_sample",
    "load_seen",
    "method_table",
    "open_candidates",
    "pabak",
    "pair_by_predictions",
    "plan_labels",
    "plot_leaderboard",
    "plot_systems",
    "ppi_mean",
    "queue_records",
    "ratio_estimate",
    "recorded_input",
    "recorded_predictions_sha256",
    "render_audit",
    "review_order",
    "run_differences",
    "run_turns_digest",
    "sample_estimates",
    "sampled_run",
    "score_predictions",
    "score_run",
    "source_from_predictions",
    "source_from_run",
    "stream_candidates",
    "stream_predictions",
    "system_table",
    "systems_figure",
    "write_audit",
    "write_candidates",
    "write_labels",
    "write_sample",
    "write_turns",
]
