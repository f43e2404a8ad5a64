"""The shapes of the files a run directory holds, checked whenever one is read back.

Run directories are files: edited by hand, truncated, copied from elsewhere. Every command
that reads one (resume, retry-errors, agreement, compare, systems, audit) relies on these
fields having these types, so they are checked once, on reading, with an error naming file,
line and field, instead of failing later inside a statistic, a template or a resumed run.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr


class _Call(BaseModel):
    model_config = ConfigDict(extra="allow")

    dimension: StrictStr | None = None
    explanation: StrictStr | None = None
    results: dict[str, Any] | None = None
    error: StrictStr | None = None
    attempts: list[dict[str, Any]] = Field(default_factory=list)


class JudgmentRow(BaseModel):
    """One judged turn as the analysis commands read it (other fields are kept as they are)."""

    model_config = ConfigDict(extra="allow")

    dialogue_id: StrictStr = Field(min_length=1)
    turn_index: StrictInt = Field(ge=0)
    verdict: StrictBool | None
    rule: dict[str, StrictBool | None]
    jga: StrictBool | None = None
    error: StrictStr | None = None
    system: StrictStr | None = None
    user: StrictStr | None = None
    pred_turn_state: dict[str, Any] | None = None
    gold_turn_state: dict[str, dict[str, Any] | None] | None = None
    calls: list[_Call] = Field(default_factory=list)
    trace: list[dict[str, Any]] = Field(default_factory=list)
    incorrect: list[StrictStr] = Field(default_factory=list)
    missed: list[StrictStr] = Field(default_factory=list)


class _Sources(BaseModel):
    model_config = ConfigDict(extra="allow")

    dialogues: StrictStr
    predictions: StrictStr
    dialogue_ids: list[StrictStr]
    schema_: StrictStr | None = Field(None, alias="schema")
    schema_sha256: StrictStr | None = None
    rules: StrictStr | None = None


class RunManifest(BaseModel):
    """``manifest.json``: what a run's answers depend on, and where its inputs came from."""

    model_config = ConfigDict(extra="allow")

    format: StrictInt
    inputs: dict[str, Any]
    config: dict[str, Any]
    templates: dict[str, Any]
    sources: _Sources
    options: dict[str, Any]


Number = StrictFloat | StrictInt


class _RuleFigures(BaseModel):
    model_config = ConfigDict(extra="allow")

    tsa: Number | None = None
    agreement: Number | None = None


class _DataFigures(BaseModel):
    model_config = ConfigDict(extra="allow")

    versions: list[StrictStr] = Field(default_factory=list)
    system: StrictStr | None = None
    dialogues: StrictStr | None = None
    predictions: StrictStr | None = None


class RunSummary(BaseModel):
    """``summary.json`` as the analysis commands read it (other fields kept as they are)."""

    model_config = ConfigDict(extra="allow")

    method: StrictStr | None = None
    prompt_variant: StrictStr | None = None
    semantics: StrictStr | None = None
    rule_match: StrictStr | None = None
    tsa: Number | None = None
    judge_jga: Number | None = None
    turns: StrictInt | None = None
    error_turns: StrictInt | None = None
    data: _DataFigures = Field(default_factory=_DataFigures)
    options: dict[str, Any] = Field(default_factory=dict)
    rule: dict[str, _RuleFigures] = Field(default_factory=dict)
    calls: dict[str, Any] = Field(default_factory=dict)
    tokens: dict[str, Number] = Field(default_factory=dict)
