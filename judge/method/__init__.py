"""The judge method: prompts, request bodies, reply parsing, rule filters and integration
into Turn State Accuracy and judge JGA."""

from ._integrate import (
    Totals,
    TurnInput,
    TurnVerdict,
    agreement,
    integrate_dialogue,
    totals,
)
from ._parse import (
    InvalidOutput,
    Judgment,
    parse_reply,
    response_schema,
)
from ._prompts import (
    Dimension,
    PromptSet,
    RenderedPrompt,
    dimensions_of,
)
from ._requests import (
    build_body,
)
from ._rules import (
    RuleSet,
    Semantics,
    default_rules,
    empty_rules,
    load_rules,
    packaged_rules_path,
)

__all__ = [
    "Dimension",
    "InvalidOutput",
    "Judgment",
    "PromptSet",
    "RenderedPrompt",
    "RuleSet",
    "Semantics",
    "Totals",
    "TurnInput",
    "TurnVerdict",
    "agreement",
    "build_body",
    "default_rules",
    "dimensions_of",
    "empty_rules",
    "integrate_dialogue",
    "load_rules",
    "packaged_rules_path",
    "parse_reply",
    "response_schema",
    "totals",
]
