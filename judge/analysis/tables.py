"""What the interfaces print of an analysis: table headers, row formatters, notes and the
leaderboard's text formats, shared by the CLI and the web pages.

Not part of the Python face (``judge.analysis.__all__``): a caller of the library gets the
reports themselves; the layout here follows what the CLI and the web show and may change
with them."""

from ._agreement import REEVALUATION_NOTE
from ._agreement_tables import (
    AGREEMENT_HEADER,
    COEFFICIENT_HEADER,
    ESTIMATE_HEADER,
    LABELS_ONLY_NOTE,
    POPULATION_HEADER,
    REEVALUATION_HEADER,
    REVIEWER_HEADER,
    format_agreement,
    format_coefficients,
    format_estimates,
    format_population,
    format_reevaluation,
    format_reviewers,
    sample_words,
)
from ._alttest import ALT_TEST_HEADER, format_alt_test
from ._labels import NOT_TIED
from ._leaderboard_out import (
    caption,
    figure_text,
    leaderboard_csv,
    leaderboard_latex,
    leaderboard_markdown,
    metric_label,
)
from ._review import ORDER_TRADEOFF

__all__ = [
    "AGREEMENT_HEADER",
    "ALT_TEST_HEADER",
    "COEFFICIENT_HEADER",
    "ESTIMATE_HEADER",
    "LABELS_ONLY_NOTE",
    "NOT_TIED",
    "ORDER_TRADEOFF",
    "POPULATION_HEADER",
    "REEVALUATION_HEADER",
    "REEVALUATION_NOTE",
    "REVIEWER_HEADER",
    "caption",
    "figure_text",
    "format_agreement",
    "format_alt_test",
    "format_coefficients",
    "format_estimates",
    "format_population",
    "format_reevaluation",
    "format_reviewers",
    "leaderboard_csv",
    "leaderboard_latex",
    "leaderboard_markdown",
    "metric_label",
    "sample_words",
]
