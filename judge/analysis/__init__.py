"""What to make of runs: human labels, agreement statistics, comparisons and the audit."""

from ._agreement import (
    AGREEMENT_HEADER,
    REEVALUATION_HEADER,
    HumanLabel,
    HumanLabels,
    agreement_report,
    format_agreement,
    format_reevaluation,
    load_labels,
)
from ._audit import (
    AuditItem,
    audit_items,
    import_decisions,
    render_audit,
    write_audit,
    write_labels,
)
from ._compare import (
    method_table,
    plot_systems,
    system_table,
    systems_figure,
)

__all__ = [
    "AGREEMENT_HEADER",
    "REEVALUATION_HEADER",
    "AuditItem",
    "HumanLabel",
    "HumanLabels",
    "agreement_report",
    "audit_items",
    "format_agreement",
    "format_reevaluation",
    "import_decisions",
    "load_labels",
    "method_table",
    "plot_systems",
    "render_audit",
    "system_table",
    "systems_figure",
    "write_audit",
    "write_labels",
]
