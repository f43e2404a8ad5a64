"""The options of each job kind as a typed model: strict types, ranges, no unknown names, no
NaN or Infinity.

One model per kind (evaluate live and batch, metrics, agreement, compare, audit, retry-errors)
is both the check a job's ``options`` pass before it is queued and what the OpenAPI document
shows of them, so the generated clients see each kind's options rather than an untyped object.
The library's own rules (``top_p`` > 0, ``timeout`` > 0, a metric's choices) still apply on
top, through :class:`judge.JudgeConfig` and :class:`judge.MetricOptions`; what depends on the
server (endpoints, their models and concurrency, a Batch API) is checked in ``_jobspec``.

A refusal names the option as a JSON path (``options.top_p``) and says what is wanted in the
words the API has always used (``must be a number from 0 to 2``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from ..._errors import DSTJudgeError, ServiceError
from ..._validation import first_problem
from ...analysis import check_tuning
from ._board import LEADERBOARD_INPUTS, LeaderboardOptions

INT64 = (-(2 ** 63), 2 ** 63 - 1)
MAX_N_BOOT = 20000
MAX_IDS = 100_000
MAX_LIST = 100
MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"
ENDPOINT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"

INPUTS: dict[str, dict[str, tuple[str, bool, bool]]] = {
    # kind -> input name -> (what it refers to, required, list)
    "evaluate": {"schema": ("schema", True, False), "dialogues": ("dialogues", True, False),
                 "predictions": ("predictions", True, False), "rules": ("rules", False, False),
                 "corrections": ("corrections", False, True)},
    "metrics": {"schema": ("schema", True, False), "dialogues": ("dialogues", True, False),
                "predictions": ("predictions", True, True),
                "corrections": ("corrections", False, True)},
    "agreement": {"run": ("job", True, False), "human": ("labels", False, False),
                  "sample": ("sample", False, False),
                  "corrections": ("corrections", False, True)},
    "compare": {"runs": ("job", True, True), "human": ("labels", False, True),
                "sample": ("sample", False, False)},
    "audit": {"run": ("job", False, False), "dialogues": ("dialogues", False, False),
              "predictions": ("predictions", False, True), "schema": ("schema", False, False),
              "corrections": ("corrections", False, True)},
    "retry-errors": {"run": ("job", True, False)},
    "leaderboard": LEADERBOARD_INPUTS,
}
"""What each kind reads, the one table of it: its models below and the references the job
checks are made from it."""

RuleMatch = Literal["exact", "nospace"]
Unset: Any = Field(default=None)
"""The default of an option a job may leave out: the library's (or the endpoint's) applies."""

Seed = Annotated[int, Field(ge=INT64[0], le=INT64[1])]
Concurrency = Annotated[int, Field(ge=1, le=1024)]
Timeout = Annotated[float, Field(ge=0.0, le=3600.0)]
MaxRetries = Annotated[int, Field(ge=0, le=20)]
Budget = Annotated[float, Field(ge=0.0, le=1_000_000.0,
                                description="USD; the server's cap, when it sets one, bounds it")]
Limit = Annotated[int, Field(ge=1, le=100_000_000, description="the first N dialogues")]
DialogueIds = Annotated[list[Annotated[str, StringConstraints(min_length=1)]],
                        Field(min_length=1, max_length=MAX_IDS)]
Confidence = Annotated[float, Field(gt=0.0, lt=1.0)]
Tuning = Annotated[str | float, Field(description="loo, plain or a number in [0, 1]")]


class _Options(BaseModel):
    """What every kind's options share: JSON values taken as they are (a string is not a
    number, a number not a flag), finite numbers, no name the kind does not know."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class RetryErrorsOptions(_Options):
    """retry-errors: how the failed calls are sent again (the rest is the run's)."""

    concurrency: Concurrency = Unset
    timeout: Timeout = Unset
    max_retries: MaxRetries = Unset
    budget: Budget | None = None


class EvaluateOptions(_Options):
    """evaluate (mode live): the CLI's judge options, underscored, the dialogues to judge, and
    one of the server's endpoints."""

    model: Annotated[str, StringConstraints(pattern=MODEL_NAME),
                     Field(description="default: the endpoint's default model")] = Unset
    method: Literal["two-dim", "two-dim-cot", "direct", "cot"] = Unset
    semantics: Literal["default", "paper"] = Unset
    rule_match: RuleMatch | None = None
    prompt_variant: Literal["zero-shot", "few-shot"] = Unset
    response_format: Literal["json_schema", "json_object", "text"] = Unset
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = Unset
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] = Unset
    seed: Seed | None = None
    max_tokens: Annotated[int, Field(ge=16, le=1_000_000)] = Unset
    timeout: Timeout = Unset
    max_retries: MaxRetries = Unset
    concurrency: Annotated[Concurrency,
                           Field(description="at most the endpoint's max_concurrency")] = Unset
    reasks: Annotated[int, Field(ge=0, le=10)] = Unset
    prompt_cache_key: bool = Unset
    budget: Budget | None = None
    limit: Limit | None = None
    dialogue_ids: DialogueIds | None = None
    endpoint: Annotated[str, StringConstraints(pattern=ENDPOINT_NAME),
                        Field(description="one of the server's endpoints (default: its "
                              "default)")] | None = None


class BatchEvaluateOptions(EvaluateOptions):
    """evaluate (mode batch): the live options and how the request files are split (one
    batch each)."""

    batch_max_requests: Annotated[int, Field(ge=1, le=50_000)] = Unset
    batch_max_bytes: Annotated[int, Field(ge=10_000, le=200_000_000)] = Unset


class MetricsOptions(_Options):
    """metrics: the CLI's metric options, underscored, the gold version and the dialogues."""

    match: Annotated[str, StringConstraints(max_length=100)] = Unset
    none_values: Annotated[list[Annotated[str, StringConstraints(max_length=100)]],
                           Field(max_length=MAX_LIST)] = Unset
    num_slots: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    aga_unit: Literal["turn", "frame"] = Unset
    rsa_empty_turn: Literal["zero", "skip", "one"] = Unset
    fga_lambdas: Annotated[list[Annotated[float, Field(ge=0.0, le=1_000_000.0)]],
                           Field(max_length=MAX_LIST)] = Unset
    update_include_removals: bool = Unset
    alpha: Annotated[float, Field(ge=0.0, le=1.0)] = Unset
    gca_dedupe: bool = Unset
    keep_explicit_none: bool = Unset
    undefined: Literal["zero", "null"] = Unset
    rule_match: RuleMatch | None = None
    per_dialogue: bool = Unset
    breakdowns: bool = Unset
    gold: Annotated[str, StringConstraints(max_length=50),
                    Field(description="the annotation version scored against, e.g. 2.1")
                    ] | None = None
    limit: Limit | None = None
    dialogue_ids: DialogueIds | None = None


def _tuning(value: str | float) -> str | float:
    try:
        return check_tuning(value)
    except DSTJudgeError as exc:
        raise ValueError(str(exc)) from None


class AgreementOptions(_Options):
    """agreement: the bootstrap and the interval."""

    n_boot: Annotated[int, Field(ge=0, le=MAX_N_BOOT)] = 1000
    seed: Seed = 0
    confidence: Confidence = 0.95
    tuning: Tuning = "loo"

    _check_tuning = field_validator("tuning")(_tuning)


class CompareOptions(_Options):
    """compare: of the differences estimated on a sample."""

    confidence: Confidence = 0.95
    tuning: Tuning = "loo"

    _check_tuning = field_validator("tuning")(_tuning)


class AuditOptions(_Options):
    """audit: no options."""



KIND_OPTIONS: dict[str, type[_Options]] = {
    "evaluate": EvaluateOptions, "metrics": MetricsOptions, "agreement": AgreementOptions,
    "compare": CompareOptions, "audit": AuditOptions, "retry-errors": RetryErrorsOptions}
"""Each job kind's options (an evaluate job in mode batch: :class:`BatchEvaluateOptions`)."""

_REASONS = {
    "model": "not a model name",
    "dialogue_ids": f"must be a list of 1 to {MAX_IDS} dialogue ids (strings)",
    "gold": "an annotation version such as '2.1'",
    "fga_lambdas": f"must be a list of at most {MAX_LIST} numbers from 0 to 1,000,000",
    "none_values": f"must be a list of at most {MAX_LIST} strings of up to 100 characters",
    "confidence": "a number strictly between 0 and 1",
}
"""What an option wants, where its type and range do not say it in a few words."""


def options_for(kind: str, mode: str = "live") -> type[_Options]:
    return BatchEvaluateOptions if kind == "evaluate" and mode == "batch" else KIND_OPTIONS[kind]


def _bounds(model: type[_Options], name: str) -> tuple[type, Any, Any] | None:
    """(int or float, lowest, highest) of a numeric option, bool for a flag."""
    shown = model.model_json_schema()["properties"][name]
    for member in shown.get("anyOf", [shown]):
        kind = member.get("type")
        if kind == "boolean":
            return bool, None, None
        if kind in ("integer", "number") and "minimum" in member and "maximum" in member:
            return (int if kind == "integer" else float), member["minimum"], member["maximum"]
    return None


def _reason(model: type[_Options], name: str, message: str) -> str:
    if name in _REASONS:
        return _REASONS[name]
    bounds = _bounds(model, name) if name in model.model_fields else None
    if bounds is None:
        return message
    kind, low, high = bounds
    if kind is bool:
        return "must be true or false"
    if kind is int:
        return f"must be a whole number from {low:,} to {high:,}"
    return f"must be a number from {low:g} to {high:g}"


def check_options(kind: str, mode: str, options: dict[str, Any]) -> _Options:
    """The options checked by the kind's model; a refusal is a 422 naming the option."""
    model = options_for(kind, mode)
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        problem = first_problem(exc)
        name = str(problem.location[0]) if problem.location else ""
        if problem.kind == "extra_forbidden":
            accepted = list(model.model_fields)
            reason = (f"unknown option; accepted: {', '.join(accepted)}" if accepted
                      else "unknown option (this kind takes none)")
        elif name in _REASONS or name in model.model_fields:
            reason = _reason(model, name, problem.message)
        else:
            reason = problem.message
        raise ServiceError(reason, status=422,
                           field=f"options.{name}" if name else "options") from None


class KindOptionsSchema:
    """Shows a request's ``options`` as the options of one of the kinds (the request's
    ``kind`` says which) in the OpenAPI document; the value is checked by :func:`check_options`
    once the kind and mode are known, with the API's own messages."""

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        kinds: TypeAdapter[Any] = TypeAdapter(
            EvaluateOptions | BatchEvaluateOptions | MetricsOptions | AgreementOptions
            | CompareOptions | AuditOptions | RetryErrorsOptions | LeaderboardOptions)
        return handler(kinds.core_schema)


OneId = Annotated[str, Field(description="a file id (a job id for runs)")]
SomeIds = OneId | Annotated[list[OneId], Field(min_length=1, max_length=MAX_LIST)]


def _inputs_model(kind: str) -> type[_Options]:
    """A kind's inputs as a model, made from :data:`INPUTS`."""
    fields: dict[str, Any] = {}
    for name, (_, required, many) in INPUTS[kind].items():
        shape: Any = SomeIds if many else OneId
        key = f"{name}_" if hasattr(BaseModel, name) else name  # "schema": pydantic's own
        fields[key] = (shape, Field(..., alias=name)) if required else (
            shape | None, Field(None, alias=name))
    title = "".join(part.title() for part in kind.split("-")) + "Inputs"
    return cast("type[_Options]", create_model(title, __base__=_Options, **fields))


KIND_INPUTS: dict[str, type[_Options]] = {kind: _inputs_model(kind) for kind in INPUTS}
"""Each job kind's inputs (``EvaluateInputs``, ...)."""


def check_inputs(kind: str, inputs: dict[str, Any]) -> None:
    """The inputs checked by the kind's model; a refusal is a 422 naming the input."""
    try:
        KIND_INPUTS[kind].model_validate(inputs)
    except ValidationError as exc:
        problem = first_problem(exc)
        name = str(problem.location[0]) if problem.location else ""
        wanted = INPUTS[kind]
        if problem.kind == "extra_forbidden":
            reason = f"unknown input for a {kind} job (expected {', '.join(wanted)})"
        elif problem.kind == "missing":
            reason = f"a {kind} job needs this input"
        elif name in wanted and wanted[name][2]:
            reason = "give at least one id" if inputs.get(name) == [] else problem.message
        elif name in wanted:
            reason = "expected one id (a string)"
        else:
            reason = problem.message
        raise ServiceError(reason, status=422,
                           field=f"inputs.{name}" if name else "inputs") from None


class KindInputsSchema:
    """Shows a request's ``inputs`` as the inputs of one of the kinds in the OpenAPI
    document (checked by :func:`check_inputs` once the kind is known)."""

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        members = tuple(KIND_INPUTS.values())
        # a Union built at run time: pydantic 2.13 types the argument as a type, 2.14 as a
        # TypeForm, and neither accepts the special form, so it goes through Any
        kinds: TypeAdapter[Any] = TypeAdapter(cast(Any, Union[members]))  # noqa: UP007
        return handler(kinds.core_schema)
