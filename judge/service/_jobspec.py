"""What a job may ask for, checked before it is queued.

Options use the CLI's option names (underscored) and pass through the same validated objects
as the CLI (:class:`judge.JudgeConfig`, :class:`judge.MetricOptions`), so a job fails on the
same values with the same reasons; errors name the field as a JSON path (``options.top_p``).

Only an allow-list reaches the library. ``base_url`` is refused in favour of ``endpoint`` (a
name the server maps to a URL and key), and everything that would read a server-side path
(``prices``, ``rules``, ``config``, ``cache_dir``) is refused: files come by id.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._config import JudgeConfig
from .._errors import DSTJudgeError, ServiceError
from .._validation import first_problem
from ..analysis import check_tuning
from ..metrics import MetricOptions
from ._board import LEADERBOARD_INPUTS, check_leaderboard_options, check_systems_input
from ._replaying import recorded_models
from ._settings import EndpointConfig, ServiceSettings

JobKind = Literal["evaluate", "metrics", "agreement", "compare", "audit", "retry-errors",
                  "leaderboard"]
JOB_KINDS: tuple[str, ...] = ("evaluate", "metrics", "agreement", "compare", "audit",
                              "retry-errors", "leaderboard")

JUDGE_OPTIONS = ("model", "method", "semantics", "rule_match", "prompt_variant",
                 "response_format", "temperature", "top_p", "seed", "max_tokens", "timeout",
                 "max_retries", "concurrency", "reasks", "prompt_cache_key", "budget")
SUBSET_OPTIONS = ("limit", "dialogue_ids")
BATCH_OPTIONS = ("batch_max_requests", "batch_max_bytes")
"""Options of batch jobs only: how request files are split (one batch each)."""
METRIC_OPTIONS = (*MetricOptions.model_fields, "gold")
AGREEMENT_OPTIONS = ("n_boot", "seed", "confidence", "tuning")
COMPARE_OPTIONS = ("confidence", "tuning")
"""Of the differences a compare job with a sample estimates."""
RETRY_OPTIONS = ("concurrency", "timeout", "max_retries", "budget")

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
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_ENDPOINT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_N_BOOT = 20000
MAX_IDS = 100_000
MAX_LIST = 100
INT64 = (-(2 ** 63), 2 ** 63 - 1)

NUMBERS: dict[str, tuple[type, float, float]] = {
    # option -> (int: a whole number, float: any finite number; lowest; highest)
    "temperature": (float, 0.0, 2.0),
    "top_p": (float, 0.0, 1.0),
    "seed": (int, *INT64),
    "max_tokens": (int, 16, 1_000_000),
    "timeout": (float, 0.0, 3600.0),
    "max_retries": (int, 0, 20),
    "concurrency": (int, 1, 1024),
    "reasks": (int, 0, 10),
    "budget": (float, 0.0, 1_000_000.0),
    "limit": (int, 1, 100_000_000),
    "batch_max_requests": (int, 1, 50_000),
    "batch_max_bytes": (int, 10_000, 200_000_000),
    "n_boot": (int, 0, MAX_N_BOOT),
    "confidence": (float, 0.0, 1.0),
    "num_slots": (int, 1, 1_000_000),
    "alpha": (float, 0.0, 1.0),
}
"""The range of every numeric option (docs/SERVICE.md lists them). Strict: a string or a
float is not a whole number, a bool is not a number; the library's own checks (``top_p`` > 0,
``timeout`` > 0, ...) apply on top."""


class JobRequest(BaseModel):
    """The body of ``POST /v1/jobs``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: JobKind
    inputs: dict[str, str | Annotated[list[str], Field(max_length=MAX_LIST)]] = Field(
        max_length=10,
        description="Input name → file id (or job id for runs); lists where the kind takes "
        "several (metrics: predictions; compare: runs, and human: one labels file per run; "
        "corrections: the corrections files of evaluate, metrics, agreement and audit; "
        "audit: predictions, given with dialogues and optionally schema in place of a run; "
        "leaderboard: systems, predictions file ids and judge run job ids mixed), "
        f"at most {MAX_LIST} ids each.")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="CLI option names, underscored.")
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
    for name in options:
        if name in REFUSED:
            raise ServiceError(f"not accepted: {REFUSED[name]}", status=422,
                               field=f"options.{name}")
    check_numbers(options)
    if request.kind == "evaluate":
        spec.options, spec.endpoint = _judge_options(options, settings, request.mode)
    elif request.kind == "retry-errors":
        _only(options, RETRY_OPTIONS)
        spec.options = _validated_config_subset(options)
    elif request.kind == "metrics":
        spec.options = _metric_options(options)
    elif request.kind == "agreement":
        spec.options = _agreement_options(options)
    elif request.kind == "compare":
        _only(options, COMPARE_OPTIONS)
        checked = _agreement_options(options)
        spec.options = {k: checked[k] for k in COMPARE_OPTIONS}
    elif request.kind == "leaderboard":
        spec.options = check_leaderboard_options(options, len(spec.inputs["systems"]))
    else:
        _only(options, ())
    budget = spec.options.get("budget")
    if settings.max_job_budget is not None:
        budget = min(budget if budget is not None else settings.max_job_budget,
                     settings.max_job_budget)
    spec.budget = budget
    return spec


def _is_bool_field(name: str) -> bool:
    for model in (JudgeConfig, MetricOptions):
        info = model.model_fields.get(name)
        if info is not None:
            return info.annotation in (bool, bool | None)
    return False


def check_numbers(options: dict[str, Any]) -> None:
    """Every numeric option of the right type (strictly) and within its range, every flag a
    JSON true or false (422): the library's settings object would read ``"yes"`` as true."""
    for name, value in options.items():
        if _is_bool_field(name) and not isinstance(value, bool) and value is not None:
            raise ServiceError("must be true or false", status=422, field=f"options.{name}")
        if name == "fga_lambdas":
            _check_list(value, name, number=True)
        elif name == "none_values":
            _check_list(value, name, number=False)
        if name not in NUMBERS:
            continue
        kind, low, high = NUMBERS[name]
        if value is None and name in ("seed", "budget", "num_slots"):
            continue
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ServiceError(f"must be a whole number from {low:,} to {high:,}",
                                   status=422, field=f"options.{name}")
        elif (isinstance(value, bool) or not isinstance(value, int | float)
              or not math.isfinite(value) or not low <= value <= high):
            raise ServiceError(f"must be a number from {low:g} to {high:g}", status=422,
                               field=f"options.{name}")


def _check_list(value: Any, name: str, *, number: bool) -> None:
    ok = isinstance(value, list) and len(value) <= MAX_LIST and all(
        (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
         and 0 <= v <= 1_000_000) if number else (isinstance(v, str) and len(v) <= 100)
        for v in value)
    if not ok:
        what = "numbers from 0 to 1,000,000" if number else "strings of up to 100 characters"
        raise ServiceError(f"must be a list of at most {MAX_LIST} {what}", status=422,
                           field=f"options.{name}")


def _check_inputs(spec: JobSpec) -> None:
    wanted = INPUTS[spec.kind]
    for name in spec.inputs:
        if name not in wanted:
            raise ServiceError(f"unknown input for a {spec.kind} job (expected "
                               f"{', '.join(wanted)})", status=422, field=f"inputs.{name}")
    for name, (refers, required, many) in wanted.items():
        value = spec.inputs.get(name)
        if value is None:
            if required:
                raise ServiceError(f"a {spec.kind} job needs this input", status=422,
                                   field=f"inputs.{name}")
            continue
        if many:
            items = [value] if isinstance(value, str) else list(value)
            if not items:
                raise ServiceError("give at least one id", status=422, field=f"inputs.{name}")
            spec.inputs[name] = items
            for index, item in enumerate(items):
                spec.references.append((f"inputs.{name}[{index}]", refers, item))
        else:
            if not isinstance(value, str):
                raise ServiceError("expected one id (a string)", status=422,
                                   field=f"inputs.{name}")
            spec.references.append((f"inputs.{name}", refers, value))


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


def _only(options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for name in options:
        if name not in allowed:
            hint = f"; accepted: {', '.join(allowed)}" if allowed else " (this kind takes none)"
            raise ServiceError(f"unknown option{hint}", status=422, field=f"options.{name}")


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
    _only(options, (*JUDGE_OPTIONS, *SUBSET_OPTIONS, "endpoint",
                    *(BATCH_OPTIONS if mode == "batch" else ())))
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
    values.update(_subset_options(options))
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
        for name in options:
            if name in REFUSED:
                raise ServiceError(f"not accepted: {REFUSED[name]}", status=422,
                                   field=f"options.{name}")
        _only(options, (*JUDGE_OPTIONS, *SUBSET_OPTIONS, *BATCH_OPTIONS, "endpoint"))
        check_numbers(options)
        endpoint_name = options.pop("endpoint", None)
        model = options.get("model")
        if model is not None and (not isinstance(model, str) or not _MODEL_NAME.match(model)):
            raise ServiceError("not a model name", status=422, field="options.model")
        if endpoint_name is not None:
            endpoint_name, endpoint = endpoint_for(endpoint_name, settings)
            check_model(endpoint_name, endpoint, model)
        values = _validated_config_subset({k: v for k, v in options.items()
                                           if k not in (*SUBSET_OPTIONS, *BATCH_OPTIONS)})
        values.update(_subset_options(options))
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


def _subset_options(options: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    limit = options.get("limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ServiceError("must be a whole number >= 1", status=422, field="options.limit")
        out["limit"] = limit
    ids = options.get("dialogue_ids")
    if ids is not None:
        if (not isinstance(ids, list) or not ids or len(ids) > MAX_IDS
                or not all(isinstance(i, str) and i for i in ids)):
            raise ServiceError(f"must be a list of 1 to {MAX_IDS} dialogue ids (strings)",
                               status=422, field="options.dialogue_ids")
        out["dialogue_ids"] = ids
    return out


def _metric_options(options: dict[str, Any]) -> dict[str, Any]:
    _only(options, (*METRIC_OPTIONS, *SUBSET_OPTIONS))
    values = {k: v for k, v in options.items() if k in MetricOptions.model_fields}
    try:
        MetricOptions.model_validate_json(json.dumps(values), strict=True)
    except ValidationError as exc:
        raise _option_error(exc) from None
    gold = options.get("gold")
    if gold is not None and (not isinstance(gold, str) or len(gold) > 50):
        raise ServiceError("an annotation version such as '2.1'", status=422,
                           field="options.gold")
    return {**values, **({"gold": gold} if gold is not None else {}),
            **_subset_options(options)}


def _agreement_options(options: dict[str, Any]) -> dict[str, Any]:
    _only(options, AGREEMENT_OPTIONS)
    n_boot = options.get("n_boot", 1000)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or not 0 <= n_boot <= MAX_N_BOOT:
        raise ServiceError(f"a whole number from 0 to {MAX_N_BOOT}", status=422,
                           field="options.n_boot")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ServiceError("a whole number", status=422, field="options.seed")
    confidence = options.get("confidence", 0.95)
    if (isinstance(confidence, bool) or not isinstance(confidence, int | float)
            or not 0 < confidence < 1):
        raise ServiceError("a number strictly between 0 and 1", status=422,
                           field="options.confidence")
    tuning = options.get("tuning", "loo")
    try:
        tuning = check_tuning(tuning)
    except DSTJudgeError as exc:
        raise ServiceError(str(exc), status=422, field="options.tuning") from None
    return {"n_boot": n_boot, "seed": seed, "confidence": float(confidence), "tuning": tuning}


def _option_error(exc: ValidationError) -> ServiceError:
    problem = first_problem(exc)
    return ServiceError(problem.message, status=422,
                        field=f"options.{problem.path}" if problem.location else "options")
