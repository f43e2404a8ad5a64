"""Every option of the exact-match suite, in one validated object recorded with each result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._names import DEFAULT_LAMBDAS as DEFAULT_LAMBDAS


class MetricOptions(BaseModel):
    """Options of :func:`judge.compute_metrics`; names follow METRICS.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    match: str = Field("exact", description="Matching policy: exact, nospace, normalized, "
                       "alternatives, or a '+' combination.")
    none_values: tuple[str, ...] = Field(("none",), description="Values meaning 'absent'.")
    num_slots: int | None = Field(None, ge=1, description="K of slot accuracy; default: the "
                                  "schema's slot count.")
    aga_unit: Literal["turn", "frame"] = "turn"
    rsa_empty_turn: Literal["zero", "skip", "one"] = "zero"
    fga_lambdas: tuple[float, ...] = Field(DEFAULT_LAMBDAS, min_length=1)
    update_include_removals: bool = Field(False, description="Turn update accuracy also "
                                          "compares slot removals.")
    alpha: float = Field(10 / 11, ge=0.0, le=1.0, description="GCA weight of value accuracy.")
    gca_dedupe: bool = Field(False, description="Do not count a slot again in GCA's "
                             "prediction-change loop once the gold-change loop counted it.")
    keep_explicit_none: bool = Field(False, description="GCA: keep explicit 'none' values as "
                                     "changes (reproduces published few-shot figures).")
    undefined: Literal["zero", "null"] = Field("zero", description="GCA with an empty "
                                               "denominator: 0 (reference) or null.")
    rule_match: Literal["exact", "nospace"] | None = Field(
        None, description="RULE verdict matching; default follows 'match'.")
    per_dialogue: bool = False
    breakdowns: bool = Field(True, description="Per-domain and per-slot breakdowns.")

    @field_validator("fga_lambdas")
    @classmethod
    def _non_negative(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(lam < 0 for lam in value):
            raise ValueError("FGA lambdas must be >= 0")
        return value
