"""The exact-match metric suite (JGA, SA, AGA, RSA, FGA, GCA, RULE, DSTC), one module per
family, and the value matching every comparison uses (see METRICS.md for the definitions)."""

from ._matching import (
    POLICY_NAMES,
    MatchPolicy,
    loose_form,
    normalize_time,
    normalize_value,
    parse_policy,
    same_value,
)
from ._options import (
    DEFAULT_LAMBDAS,
    MetricOptions,
)
from ._profiles import (
    PROFILE_NAMES,
    PROFILES,
    Profile,
    get_profile,
    profile_table,
    score_profile,
)
from ._rule import (
    rule_policy,
    rule_verdicts,
)
from ._suite import (
    MetricsReport,
    SystemMetrics,
    compute_metrics,
    stream_metrics,
)
from ._tables import (
    PaperTables,
    paper_tables,
    stream_paper_tables,
    to_csv,
    to_latex,
)
from ._turns import (
    TurnScorer,
    TurnVerdicts,
    gca_from_counts,
    turn_verdicts,
)
from ._types import (
    f1,
    ratio,
)

__all__ = [
    "DEFAULT_LAMBDAS",
    "POLICY_NAMES",
    "PROFILES",
    "PROFILE_NAMES",
    "MatchPolicy",
    "MetricOptions",
    "MetricsReport",
    "PaperTables",
    "Profile",
    "SystemMetrics",
    "TurnScorer",
    "TurnVerdicts",
    "compute_metrics",
    "f1",
    "gca_from_counts",
    "get_profile",
    "loose_form",
    "normalize_time",
    "normalize_value",
    "paper_tables",
    "parse_policy",
    "profile_table",
    "ratio",
    "rule_policy",
    "rule_verdicts",
    "same_value",
    "score_profile",
    "stream_metrics",
    "stream_paper_tables",
    "to_csv",
    "to_latex",
    "turn_verdicts",
]
