"""Pair statistics from confusion counts, and how their bootstrap intervals are drawn.

Shared by every agreement figure (rater pairs, population estimates, comparisons): the
counts may be weighted and come in a stack of bootstrap replicates, so one vectorised pass
covers them all. A statistic undefined on the data is NaN here and ``None`` once reported.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import OptionError
from ._statistics import pair_statistics, percentile_interval
from .reports import BootstrapInfo

LABEL_NAMES: tuple[str, str] = ("incorrect", "correct")
"""Label order of every confusion matrix: index 0 = incorrect, 1 = correct."""

STATISTICS: tuple[str, ...] = ("accuracy", "kappa", "precision", "recall", "f1")
PAIR_STATISTICS: tuple[str, ...] = (*STATISTICS, "ac1", "alpha", "pabak")
"""Everything a rater pair reports; ``accuracy``, ``precision``, ``recall``, ``f1`` in %."""


def statistics_from_counts(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, kappa and incorrect-class precision/recall/F1 from confusion counts.

    ``counts[..., :]`` is ``[c00, c01, c10, c11]`` where ``cXY`` counts turns rater a labelled
    X and rater b labelled Y (0 = incorrect). Vectorised so that thousands of bootstrap
    replicates cost one pass; counts may be weighted; undefined values come out as NaN.
    Percentages are ×100.
    """
    c = np.asarray(counts, dtype=float)
    c00, c01, c10 = (c[..., i] for i in range(3))
    table = pair_statistics(c.reshape(*c.shape[:-1], 2, 2))

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    return {
        "accuracy": 100.0 * table["agreement"],
        "kappa": table["kappa"],
        "precision": 100.0 * ratio(c00, c00 + c01),
        "recall": 100.0 * ratio(c00, c00 + c10),
        "f1": 100.0 * ratio(2 * c00, 2 * c00 + c01 + c10),
        "ac1": table["ac1"],
        "alpha": table["alpha"],
        "pabak": table["pabak"],
    }


def _rng(seed: int, name: str) -> np.random.Generator:
    """A generator per comparison, so adding a rater does not change another pair's interval."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def _optional(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if np.isfinite(value) else None


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: replicates, seed, confidence level."""

    n_boot: int = 1000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if isinstance(self.n_boot, bool) or not isinstance(self.n_boot, int) or self.n_boot < 0:
            raise OptionError(f"n_boot must be a whole number >= 0 (got {self.n_boot!r})")
        if not 0.0 < self.confidence < 1.0:
            raise OptionError(
                f"confidence must lie strictly between 0 and 1 (got {self.confidence!r})")

    def rng(self, name: str) -> np.random.Generator:
        return _rng(self.seed, name)

    def interval(self, replicates: np.ndarray) -> list[float] | None:
        return percentile_interval(replicates, self.confidence)

    def describe(self) -> BootstrapInfo:
        return {"n_boot": self.n_boot, "seed": self.seed, "confidence": self.confidence,
                "unit": "dialogue", "method": "percentile"}


