"""What a job may ask for, checked before it is queued.

Options use the CLI's option names (underscored) and pass through the same validated objects
as the CLI (:class:`judge.JudgeConfig`, :class:`judge.MetricOptions`), so a job fails on the
same values with the same reasons; errors name the field as a JSON path (``options.top_p``).
Each kind's options are first held to its typed model (``_options``: types, ranges, names),
which is also what the OpenAPI document shows of them.

Only an allow-list reaches the library. ``base_url`` is refused in favour of ``endpoint`` (a
name the server maps to a URL and key), and everything that would read a server-side path
(``prices``, ``rules``, ``config``, ``cache_dir``) is refused: files come by id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..._config import JudgeConfig
from ..._errors import ServiceError
from ..._validation import first_problem
from ...metrics import MetricOptions
from ..db import EndpointConfig, ServiceSettings
from ..ledger import recorded_models
from ._board import check_leaderboard_options, check_systems_input
from ._options import (
    ENDPOINT_NAME,
    INPUTS,
    MAX_LIST,
    MODEL_NAME,
    BatchEvaluateOptions,
    EvaluateOptions,
    KindInputsSchema,
    KindOptionsSchema,
    check_inputs,
    check_options,
)

JobKind = Literal["evaluate", "metrics", "agreement", "compare", "audit", "retry-errors",
                  "leaderboard"]
JOB_KINDS: tuple[str, ...] = ("evaluate", "metrics", "agreement", "compare", "audit",
                              "retry-errors", "leaderboard")

SUBSET_OPTIONS = ("limit", "dialogue_ids")
JUDGE_OPTIONS = tuple(name for name in EvaluateOptions.model_fields
                      if name not in (*SUBSET_OPTIONS, "endpoint"))
"""The evaluate options that reach the judge's configuration."""
BATCH_OPTIONS = tuple(name for name in BatchEvaluateOptions.model_fields
                      if name not in EvaluateOptions.model_fields)
"""Options of batch jobs only: how request files are split (one batch each)."""

REFUSED = {
    "base_url": "a job cannot name a URL; choose one of the server's endpoints with 'endpoint'",
    "api_key": "keys are configured on the server, never sent with a job",
    "organization": "set on the server's endpoint configuration",
    "project": "set on the server's endpoint configuration",
    "prices": "prices are the server's (its endpoint configuration)",
    "rules": "upload a rules file (kind 'rules') and pass its id as inputs.rules",
    "config": "a job's options are given inline, not as a server-side file",
    "cache_dir": "each project has its own cache on the server",
    "use_cache": "the server decides caching (one cache per project)",
    "no_cache": "the server decides caching (one cache per project)",
    "http_backend": "the server decides its HTTP stack",
    "rpm": "rate limits are the server's, shared by every job of an endpoint",
    "tpm": "rate limits are the server's, shared by every job of an endpoint",
    "out": "results stay on the server: fetch them with /results, /judgments or /export",
}

_MODEL_NAME = re.compile(MODEL_NAME)
_ENDPOINT_NAME = re.compile(ENDPOINT_NAME)


class JobRequest(BaseModel):
    """The body of ``POST /v1/jobs``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: JobKind
    inputs: Annotated[dict[str, str | Annotated[list[str], Field(max_length=MAX_LIST)]],
                      KindInputsSchema()] = Field(
        max_length=10,
        description="Input name → file id (or job id for runs); lists where the kind takes "
        "several (metrics: predictions; compare: runs, and human: one labels file per run; "
        "corrections: the corrections files of evaluate, metrics, agreement and audit; "
        "audit: predictions, given with dialogues and optionally schema in place of a run; "
        "leaderboard: systems, predictions file ids and judge run job ids mixed), "
        f"at most {MAX_LIST} ids each.")
    options: Annotated[dict[str, Any], KindOptionsSchema()] = Field(
        default_factory=dict,
        description="CLI option names, underscored: the options of the request's kind "
        "(EvaluateOptions, or BatchEvaluateOptions in mode batch; MetricsOptions, "
        "AgreementOptions, CompareOptions, AuditOptions, RetryErrorsOptions).")
    mode: Literal["live", "batch"] = "live"

    @field_validator("inputs", mode="before")
    @classmethod
    def _few_inputs(cls, value: Any) -> Any:
        """Refused at once, as one error: checked item by item, a body of 50,000 inputs was
        100,000 errors (each of two types)."""
        if isinstance(value, dict) and len(value) > 10:
            raise ValueError("a job takes at most 10 inputs")
        return value


@dataclass
class JobSpec:
    """A checked request: options normalised, endpoint resolved, references listed."""

    kind: str
    mode: str
    inputs: dict[str, str | list[str]]
    options: dict[str, Any]
    endpoint: str | None = None
    budget: float | None = None
    references: list[tuple[str, str, str]] = field(default_factory=list)
    """(input path for messages, kind expected, id) of every file or job the job reads."""


def check_job(request: JobRequest, settings: ServiceSettings) -> JobSpec:
    """Validate a job request against the allow-lists; raises 422 naming the field."""
    if request.mode == "batch" and request.kind != "evaluate":
        raise ServiceError(f"a {request.kind} job runs live only; mode 'batch' is for "
                           "evaluate jobs", status=422, field="mode")
    spec = JobSpec(request.kind, request.mode, dict(request.inputs), {})
    if request.kind == "audit":
        _audit_inputs(spec.inputs)
    _check_inputs(spec)
    if request.kind == "leaderboard":
        spec.references = [r for r in spec.references if not r[0].startswith("inputs.systems")]
        spec.references[:0] = check_systems_input(list(spec.inputs["systems"]))
    options = dict(request.options)
    _refuse(options)
    # a leaderboard's options are checked against its systems too (check_leaderboard_options)
    typed = (None if request.kind == "leaderboard"
             else _typed(request.kind, request.mode, options, settings))
    if request.kind == "evaluate":
        spec.options, spec.endpoint = _judge_options(options, settings, request.mode)
    elif request.kind == "retry-errors":
        spec.options = _validated_config_subset(options)
    elif request.kind == "metrics":
        spec.options = _metric_options(options)
    elif request.kind in ("agreement", "compare") and typed is not None:
        spec.options = typed.model_dump()
    elif request.kind == "leaderboard":
        spec.options = check_leaderboard_options(options, len(spec.inputs["systems"]))
    budget = spec.options.get("budget")
    if settings.max_job_budget is not None:
        budget = min(budget if budget is not None else settings.max_job_budget,
                     settings.max_job_budget)
    spec.budget = budget
    return spec


def _typed(kind: str, mode: str, options: dict[str, Any], settings: ServiceSettings
           ) -> BaseModel:
    """The options held to their kind's model; an endpoint it refuses is named with the
    server's endpoints (what the model cannot know)."""
    try:
        return check_options(kind, mode, options)
    except ServiceError as exc:
        if exc.field == "options.endpoint":
            endpoint_for(options.get("endpoint"), settings)
        raise


def _refuse(options: dict[str, Any]) -> None:
    """An option the server decides, or one that would read a server path, refused with the
    reason (before its kind's model calls it merely unknown)."""
    for name in options:
        if name in REFUSED:
            raise ServiceError(f"not accepted: {REFUSED[name]}", status=422,
                               field=f"options.{name}")


def _check_inputs(spec: JobSpec) -> None:
    """The inputs held to their kind's model; lists where the kind takes several (one id
    becomes a list of one), and every file or job they refer to listed."""
    check_inputs(spec.kind, spec.inputs)
    for name, (refers, _, many) in INPUTS[spec.kind].items():
        value = spec.inputs.get(name)
        if value is None:
            continue
        if many:
            items = [value] if isinstance(value, str) else list(value)
            spec.inputs[name] = items
            for index, item in enumerate(items):
                spec.references.append((f"inputs.{name}[{index}]", refers, item))
        else:
            spec.references.append((f"inputs.{name}", refers, str(value)))


def _audit_inputs(inputs: dict[str, Any]) -> None:
    """An audit reads a judge run (``run``) or, with no judge run at all, predictions files
    (``dialogues`` and ``predictions``, ``schema`` optional): one or the other."""
    if "run" in inputs:
        for name in ("dialogues", "predictions", "schema"):
            if name in inputs:
                raise ServiceError("an audit of a judge run reads the run's own data; give "
                                   "either run or dialogues and predictions", status=422,
                                   field=f"inputs.{name}")
        return
    for name in ("dialogues", "predictions"):
        if name not in inputs:
            raise ServiceError("an audit job needs run (a judge run) or dialogues and "
                               "predictions (predictions files, no judge)", status=422,
                               field=f"inputs.{name}")


def endpoint_for(name: str | None, settings: ServiceSettings) -> tuple[str, EndpointConfig]:
    endpoints = settings.all_endpoints()
    chosen = name if name is not None else settings.default_endpoint_name
    if not isinstance(chosen, str) or not _ENDPOINT_NAME.match(chosen) or chosen not in endpoints:
        raise ServiceError(f"unknown endpoint; this server offers: {', '.join(endpoints)}",
                           status=422, field="options.endpoint")
    return chosen, endpoints[chosen]


def check_model(name: str, endpoint: EndpointConfig, model: str | None, *,
                field: str = "options.model") -> None:
    """A model the endpoint can answer for (422 naming those it can): one of its ``models``
    when it lists them, and one its cassettes recorded when it replays (it has no reply for
    any other: a job would fail on every call). No model means the library's default, the
    model such a job would run, so an allow-list holds for it too; the message then says the
    job named none and which model it would have run."""
    unnamed = ""
    if model is None:
        model = JudgeConfig.model_fields["model"].default
        unnamed = (f" (this job names no model, so it would run the default {model!r}; "
                   f"name one in {field})")
    if endpoint.models is not None and model not in endpoint.models:
        raise ServiceError(f"endpoint {name!r} offers: {', '.join(endpoint.models)}{unnamed}",
                           status=422, field=field)
    recorded = recorded_models(endpoint)
    if recorded is not None and model not in recorded:
        raise ServiceError(f"endpoint {name!r} replays recordings only, and holds none of model "
                           f"{model!r}: it recorded {', '.join(sorted(recorded)) or 'no model'}"
                           f"{unnamed}", status=422, field=field)


def _judge_options(options: dict[str, Any], settings: ServiceSettings, mode: str = "live"
                   ) -> tuple[dict[str, Any], str]:
    name, endpoint = endpoint_for(options.pop("endpoint", None), settings)
    if mode == "batch" and not endpoint.offers_batch():
        raise ServiceError(f"endpoint {name!r} has no Batch API on this server (its "
                           "configuration does not set batch_api); submit with mode 'live'",
                           status=422, field="mode")
    model = options.get("model", endpoint.default_model)
    if model is not None:
        if not isinstance(model, str) or not _MODEL_NAME.match(model):
            raise ServiceError("not a model name", status=422, field="options.model")
        options["model"] = model
    check_model(name, endpoint, model)
    concurrency = options.get("concurrency")
    if concurrency is not None and concurrency > endpoint.max_concurrency:
        raise ServiceError(f"at most {endpoint.max_concurrency} on endpoint {name!r}",
                           status=422, field="options.concurrency")
    values = _validated_config_subset({k: v for k, v in options.items()
                                       if k not in SUBSET_OPTIONS})
    values.update({k: options[k] for k in SUBSET_OPTIONS if options.get(k) is not None})
    return values, name


def check_bundle_options(options: Any, settings: ServiceSettings
                         ) -> tuple[dict[str, Any], str | None]:
    """The options of an imported run (a bundle's ``bundle.json``), held to job creation's
    rules so that nothing imported can make a later retry call an address or use a key a job
    could not: a URL, a key or a server path is refused with the same reason (422
    ``options.<name>``), as is an unknown option or a value out of range; an ``endpoint``
    must be one of this server's (it is then the run's endpoint). Returns the options and
    the endpoint's name (None when the bundle names none)."""
    if not isinstance(options, dict):
        raise ServiceError("bundle.json: options must be a JSON object", status=422,
                           field="options")
    options = dict(options)
    try:
        _refuse(options)
        _typed("evaluate", "batch", options, settings)
        endpoint_name = options.pop("endpoint", None)
        model = options.get("model")
        if model is not None and (not isinstance(model, str) or not _MODEL_NAME.match(model)):
            raise ServiceError("not a model name", status=422, field="options.model")
        if endpoint_name is not None:
            endpoint_name, endpoint = endpoint_for(endpoint_name, settings)
            check_model(endpoint_name, endpoint, model)
        values = _validated_config_subset({k: v for k, v in options.items()
                                           if k not in (*SUBSET_OPTIONS, *BATCH_OPTIONS)})
        values.update({k: options[k] for k in SUBSET_OPTIONS if options.get(k) is not None})
        values.update({k: options[k] for k in BATCH_OPTIONS if k in options})
    except ServiceError as exc:
        raise ServiceError(f"bundle.json: {exc.reason}", status=exc.status,
                           field=exc.field) from None
    return values, endpoint_name


def _validated_config_subset(options: dict[str, Any]) -> dict[str, Any]:
    """Check values with JudgeConfig itself (same rules as the CLI, strictly: as JSON, a
    string is not a number); keep them as given."""
    try:
        JudgeConfig.model_validate_json(json.dumps(options), strict=True)
    except ValidationError as exc:
        raise _option_error(exc) from None
    return dict(options)


def _metric_options(options: dict[str, Any]) -> dict[str, Any]:
    """Checked by :class:`MetricOptions` itself (the CLI's rules), strictly."""
    values = {k: v for k, v in options.items() if k in MetricOptions.model_fields}
    try:
        MetricOptions.model_validate_json(json.dumps(values), strict=True)
    except ValidationError as exc:
        raise _option_error(exc) from None
    gold = options.get("gold")
    return {**values, **({"gold": gold} if gold is not None else {}),
            **{k: options[k] for k in SUBSET_OPTIONS if options.get(k) is not None}}


def _agreement_options(options: dict[str, Any]) -> dict[str, Any]:
    """An agreement job's options with their defaults filled in."""
    return check_options("agreement", "live", options).model_dump()


def _option_error(exc: ValidationError) -> ServiceError:
    problem = first_problem(exc)
    return ServiceError(problem.message, status=422,
                        field=f"options.{problem.path}" if problem.location else "options")
