"""What to make of runs: human labels, agreement statistics, sampling for labels, comparisons,
the audit page and ranked label-error candidates."""

from ._agreement import (
    AGREEMENT_HEADER,
    COEFFICIENT_HEADER,
    POPULATION_HEADER,
    REEVALUATION_HEADER,
    REEVALUATION_NOTE,
    REVIEWER_HEADER,
    agreement_report,
    format_agreement,
    format_coefficients,
    format_population,
    format_reevaluation,
    format_reviewers,
)
from ._audit import (
    AuditItem,
    audit_items,
    import_decisions,
    render_audit,
    write_audit,
)
from ._compare import (
    method_table,
    plot_systems,
    system_table,
)
from ._labels import (
    HumanLabel,
    HumanLabels,
    SlotLabel,
    load_labels,
    write_labels,
)
from ._sampling import (
    ALLOCATIONS,
    Sample,
    SampledTurn,
    draw_sample,
    load_sample,
    write_sample,
)
from ._statistics import (
    cohen_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
)

__all__ = [
    "AGREEMENT_HEADER",
    "ALLOCATIONS",
    "COEFFICIENT_HEADER",
    "POPULATION_HEADER",
    "REEVALUATION_HEADER",
    "REEVALUATION_NOTE",
    "REVIEWER_HEADER",
    "AuditItem",
    "HumanLabel",
    "HumanLabels",
    "Sample",
    "SampledTurn",
    "SlotLabel",
    "agreement_report",
    "audit_items",
    "cohen_kappa",
    "draw_sample",
    "format_agreement",
    "format_coefficients",
    "format_population",
    "format_reevaluation",
    "format_reviewers",
    "gwet_ac1",
    "import_decisions",
    "krippendorff_alpha",
    "load_labels",
    "load_sample",
    "method_table",
    "pabak",
    "plot_systems",
    "render_audit",
    "system_table",
    "write_audit",
    "write_labels",
    "write_sample",
]
