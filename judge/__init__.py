"""dst-judge: score dialogue state tracking with an LLM judge and exact-match metrics.

The public surface is what ``__all__`` lists; every ``judge._*`` module is private.
"""

from ._config import JudgeConfig, load_config
from ._data import (
    Dialogue,
    DialogueSet,
    PredDialogue,
    PredictionSet,
    PredTurn,
    State,
    Turn,
    load_dialogues,
    load_predictions,
    read_id_list,
)
from ._errors import (
    CassetteMiss,
    DataMismatchError,
    DSTJudgeError,
    InputError,
    ModelError,
    OptionError,
)
from ._evaluate import EvaluationResult, collect, evaluate, evaluate_async
from ._matching import MatchPolicy, normalize_value, parse_policy
from ._metrics._options import MetricOptions
from ._metrics._suite import MetricsReport, SystemMetrics, compute_metrics
from ._schema import DomainSpec, Schema, SlotSpec, load_schema
from ._states import (
    IntegrationIssue,
    apply_turn_state,
    check_integration,
    cumulative_states,
    turn_state,
    turn_states,
)
from ._version import __version__

__all__ = [
    "CassetteMiss",
    "DSTJudgeError",
    "DataMismatchError",
    "Dialogue",
    "DialogueSet",
    "DomainSpec",
    "EvaluationResult",
    "InputError",
    "IntegrationIssue",
    "JudgeConfig",
    "MatchPolicy",
    "MetricOptions",
    "MetricsReport",
    "ModelError",
    "OptionError",
    "PredDialogue",
    "PredTurn",
    "PredictionSet",
    "Schema",
    "SlotSpec",
    "State",
    "SystemMetrics",
    "Turn",
    "__version__",
    "apply_turn_state",
    "check_integration",
    "collect",
    "compute_metrics",
    "cumulative_states",
    "evaluate",
    "evaluate_async",
    "load_config",
    "load_dialogues",
    "load_predictions",
    "load_schema",
    "normalize_value",
    "parse_policy",
    "read_id_list",
    "turn_state",
    "turn_states",
]
