"""dst-judge: score dialogue state tracking with an LLM judge and exact-match metrics.

``import judge`` gives the main jobs, each with its typed result (``__all__``, documented with
a runnable example each in ``docs/python.md``): load the data, a config and runs; evaluate
(and the dry run); the exact-match metrics; agreement; the estimate of a metric from a
labelled sample; the audit; corrections of the gold; the leaderboard; the service's client.
Everything else is in the stages' faces (``judge.data``, ``judge.metrics``, ``judge.method``,
``judge.model``, ``judge.store``, ``judge.pipeline``, ``judge.analysis``) and the exceptions in
``judge.errors``; every module whose name starts with ``_`` is private.

The names are imported when first used (module ``__getattr__``), so that ``import judge`` and
``dst-judge --help`` do not load numpy, the stages and their libraries up front.
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__

if _typing.TYPE_CHECKING:
    from ._config import JudgeConfig, load_config
    from ._errors import DSTJudgeError, InputError
    from .analysis import (
        AgreementReport,
        Layout,
        Leaderboard,
        SampleEstimates,
        agreement_report,
        build_leaderboard,
        draw_sample,
        find_candidates,
        load_audit_inputs,
        load_labels,
        sample_estimates,
        score_predictions,
        write_audit,
    )
    from .client import Client
    from .data import (
        CorrectedGold,
        apply_corrections,
        load_dialogues,
        load_predictions,
        load_schema,
        read_corrections,
    )
    from .metrics import (
        MetricOptions,
        MetricsReport,
        compute_metrics,
    )
    from .pipeline import (
        EvaluationResult,
        Run,
        corrected_rows,
        dry_run,
        evaluate,
        load_run,
    )

_HOMES: dict[str, str] = {
    # load
    "load_schema": ".data",
    "load_dialogues": ".data",
    "load_predictions": ".data",
    "load_config": "._config",
    "load_run": ".pipeline",
    "load_labels": ".analysis",
    # evaluate
    "JudgeConfig": "._config",
    "evaluate": ".pipeline",
    "dry_run": ".pipeline",
    "EvaluationResult": ".pipeline",
    "Run": ".pipeline",
    # metrics
    "MetricOptions": ".metrics",
    "MetricsReport": ".metrics",
    "compute_metrics": ".metrics",
    # agreement
    "agreement_report": ".analysis",
    "AgreementReport": ".analysis",
    # estimate
    "draw_sample": ".analysis",
    "sample_estimates": ".analysis",
    "SampleEstimates": ".analysis",
    # audit
    "load_audit_inputs": ".analysis",
    "find_candidates": ".analysis",
    "write_audit": ".analysis",
    # corrections
    "read_corrections": ".data",
    "apply_corrections": ".data",
    "corrected_rows": ".pipeline",
    "CorrectedGold": ".data",
    # leaderboard
    "Layout": ".analysis",
    "score_predictions": ".analysis",
    "build_leaderboard": ".analysis",
    "Leaderboard": ".analysis",
    # client and errors
    "Client": ".client",
    "DSTJudgeError": "._errors",
    "InputError": "._errors",
    "estimate": ".pipeline",  # the dry run's old name: warns, not listed in __all__
}
"""Where each public name lives (its subpackage or root module), by the job it serves."""


if not _typing.TYPE_CHECKING:  # a type checker sees the imports above, so a name off the face
    # (or misspelt) is an error in a caller's code rather than Any

    def __getattr__(name: str) -> _typing.Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'judge' has no attribute {name!r}")
        value = getattr(_importlib.import_module(home, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AgreementReport",
    "Client",
    "CorrectedGold",
    "DSTJudgeError",
    "EvaluationResult",
    "InputError",
    "JudgeConfig",
    "Layout",
    "Leaderboard",
    "MetricOptions",
    "MetricsReport",
    "Run",
    "SampleEstimates",
    "__version__",
    "agreement_report",
    "apply_corrections",
    "build_leaderboard",
    "compute_metrics",
    "corrected_rows",
    "draw_sample",
    "dry_run",
    "evaluate",
    "find_candidates",
    "load_audit_inputs",
    "load_config",
    "load_dialogues",
    "load_labels",
    "load_predictions",
    "load_run",
    "load_schema",
    "read_corrections",
    "sample_estimates",
    "score_predictions",
    "write_audit",
]
"""The main jobs and their results (grouped by job in ``_HOMES``)."""
