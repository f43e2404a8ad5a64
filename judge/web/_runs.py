"""The runs page (every job of the project with live progress), submitting an evaluation from
uploaded files, cancelling, and downloading results and bundles.

Submissions go through exactly the service's checks: uploads through the file store (the
CLI's validation and messages, naming file, line and field), options through the job checker
(``JudgeConfig`` itself, the option allow-list, the endpoint's models and limits), so a form
fails where ``dst-judge evaluate`` or ``POST /v1/jobs`` would, with the same words, shown
beside the field at fault.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from .._config import JudgeConfig
from .._errors import ServiceError
from .._validation import first_problem
from ..service import (
    FINAL,
    STATUSES,
    WITH_RESULTS,
    GzipResponse,
    JobRequest,
    JobStatus,
    NDJSONResponse,
    ServerEvent,
    Service,
    ServiceDep,
    attachment,
    event_stream,
    export_bundle,
    json_lines,
    server_sent_events,
)
from ._common import PREFIX, WebRoute, plural, render, takes_uploads
from ._session import CurrentViewer, needs
from ._state import WebDep, WebState
from ._viewer import Viewer

router = APIRouter(route_class=WebRoute)

FILE_INPUTS = (("schema", "Schema", True), ("dialogues", "Dialogues", True),
               ("predictions", "Predictions", True), ("rules", "Rules", False))
JUDGE_FIELDS = ("method", "prompt_variant", "semantics", "rule_match", "response_format",
                "temperature", "top_p", "seed", "max_tokens", "timeout", "max_retries",
                "concurrency", "reasks", "prompt_cache_key", "budget")
PAGE = 50


# --- describing jobs -----------------------------------------------------------------------------


def job_label(web: WebState, viewer: Viewer, job: Mapping[str, Any]) -> str:
    """What a person calls a job: its system (and method) for judge runs."""
    summary_system = None
    inputs = job.get("inputs") or {}
    if job["kind"] in ("evaluate", "retry-errors"):
        bundle = inputs.get("bundle")
        if isinstance(bundle, dict):
            described = ((bundle.get("inputs") or {}).get("predictions") or {})
            summary_system = described.get("name") if isinstance(described, dict) else None
        file_id = inputs.get("predictions")
        if isinstance(file_id, str):
            summary_system = web.file_label(viewer.project_id, file_id)
        method = (job.get("options") or {}).get("method") or "two-dim"
        return f"{summary_system or job['id']} · {method}"
    if job["kind"] == "audit" and "run" not in inputs:
        return f"audit of {plural(len(inputs.get('predictions') or []), 'predictions file')}"
    if job["kind"] in ("agreement", "audit"):
        return f"{job['kind']} of {inputs.get('run')}"
    if job["kind"] == "compare":
        return f"compare {plural(len(inputs.get('runs') or []), 'run')}"
    return str(job["kind"])


def live_fields(job: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a job the runs page updates while it runs (sent as events)."""
    progress = job.get("progress") or {}
    headline = job.get("headline") or {}
    status = job["status"]
    return {"id": job["id"], "status": status, "exit_meaning": job.get("exit_meaning"),
            "error": job.get("error"), "cancel_requested": job.get("cancel_requested"),
            # what the page's script needs of the lifecycle, so it names no state itself
            "is_running": status == JobStatus.RUNNING, "final": status in FINAL,
            "has_results": status in WITH_RESULTS,
            "progress": {k: progress.get(k) for k in ("done", "total", "cost_usd", "errors",
                                                      "cache_hits", "eta_seconds", "tokens")},
            "headline": {"tsa": headline.get("tsa"), "judge_jga": headline.get("judge_jga"),
                         "rule_agreement": headline.get("rule_agreement") or {}}}


# --- the runs page -------------------------------------------------------------------------------


@router.get("/")
def runs_page(request: Request, viewer: CurrentViewer, web: WebDep,
              service: ServiceDep, status: str = "", kind: str = "",
              page: Annotated[int, Query(ge=1, le=100000)] = 1) -> Response:
    chosen_status = status if status in STATUSES else None
    chosen_kind = kind or None
    jobs = service.jobs.list(viewer.project_id, status=chosen_status, kind=chosen_kind,
                             limit=PAGE + 1, offset=(page - 1) * PAGE)
    more = len(jobs) > PAGE
    jobs = jobs[:PAGE]
    items = [{"job": job, "label": job_label(web, viewer, job), "live": live_fields(job),
              "final": job["status"] in FINAL} for job in jobs]
    watching = [job["id"] for job in jobs if job["status"] not in FINAL]
    return render(request, "runs.html", items=items, status=status, kind=kind, page=page,
                  more=more, statuses=STATUSES, watching=watching,
                  kinds=("evaluate", "retry-errors", "metrics", "agreement", "compare", "audit"))


@router.get("/events")
async def events(request: Request, viewer: CurrentViewer, service: ServiceDep,
                 job: Annotated[list[str] | None, Query()] = None) -> Response:
    """Server-sent events for the jobs a page shows: ``job`` with the live fields whenever
    one changes, until all are final (or the page goes away)."""
    pending = list(dict.fromkeys(job or []))[:100]
    last: dict[str, Any] = {}

    async def poll() -> tuple[list[ServerEvent], bool]:
        changed = []
        for job_id in list(pending):
            try:
                current = await asyncio.to_thread(service.jobs.get, viewer.project_id, job_id)
            except ServiceError:
                pending.remove(job_id)
                continue
            fields = live_fields(current)
            if fields != last.get(job_id):
                last[job_id] = fields
                changed.append(ServerEvent("job", fields))
            if current["status"] in FINAL:
                pending.remove(job_id)
        if not pending:
            return [*changed, ServerEvent("done", {})], True
        return changed, False

    return event_stream(server_sent_events(poll, request, closing=lambda: service.closing))


@router.post("/runs/{job_id}/cancel", dependencies=[needs("submit")])
async def cancel(request: Request, viewer: CurrentViewer,
                 service: ServiceDep, job_id: str) -> Response:
    form = await request.form()
    job = await run_in_threadpool(service.jobs.cancel, viewer.project_id, job_id)
    if "application/json" in request.headers.get("accept", ""):
        return Response(json.dumps(live_fields(job)), media_type="application/json")
    back = _text(form.get("back"))
    target = back if back in (f"{PREFIX}/", f"{PREFIX}/runs/{job_id}") else f"{PREFIX}/"
    return RedirectResponse(target, status_code=303)


# --- downloads -----------------------------------------------------------------------------------


@router.get("/runs/{job_id}/download/results.json")
def download_results(request: Request, viewer: CurrentViewer,
                     service: ServiceDep, job_id: str) -> Response:
    row = service.jobs.row(viewer.project_id, job_id)
    if row.summary is None:
        raise ServiceError(f"job is {row.status}; results exist once it has finished",
                           status=409)
    body = json.dumps(row.summary, indent=2, ensure_ascii=False) + "\n"
    return Response(body, media_type="application/json",
                    headers=attachment(f"{job_id}-results.json"))


@router.get("/runs/{job_id}/download/judgments.jsonl")
def download_judgments(request: Request, viewer: CurrentViewer,
                       service: ServiceDep, job_id: str) -> Response:
    rows = service.jobs.judgments(viewer.project_id, job_id)
    first = next(rows, None)

    return NDJSONResponse(json_lines(rows if first is None else itertools.chain([first], rows)),
                          headers=attachment(f"{job_id}-judgments.jsonl"))


@router.get("/runs/{job_id}/download/bundle.tar.gz")
def download_bundle(request: Request, viewer: CurrentViewer,
                    service: ServiceDep, job_id: str) -> Response:
    name, data = export_bundle(service, viewer.project_id, job_id)
    return GzipResponse(data, headers=attachment(name))


@router.get("/runs/{job_id}/download/artifact/{name}")
def download_artifact(request: Request, viewer: CurrentViewer,
                      service: ServiceDep, job_id: str, name: str
                      ) -> Response:
    content_type, data = service.jobs.artifact(viewer.project_id, job_id, name)
    headers = {**attachment(name), "Content-Security-Policy": "sandbox allow-scripts"}
    return Response(data, media_type=content_type, headers=headers)


# --- submitting ----------------------------------------------------------------------------------


def _choices(annotation: Any) -> tuple[list[str] | None, str, bool]:
    """(choices, python type name, optional) of a JudgeConfig field annotation."""
    optional = False
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        optional = type(None) in args
        inner = [a for a in args if a is not type(None)]
        annotation = inner[0] if len(inner) == 1 else annotation
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return [str(a) for a in args], "choice", optional
    name = getattr(annotation, "__name__", "str")
    return None, name if name in ("int", "float", "bool") else "str", optional


def option_fields() -> list[dict[str, Any]]:
    """The judge options of the form, described by JudgeConfig as the CLI's flags are."""
    out = []
    for name in JUDGE_FIELDS:
        info = JudgeConfig.model_fields[name]
        choices, kind, optional = _choices(info.annotation)
        default = info.default if info.default is not None else None
        limits = {}
        for item in info.metadata:
            for key in ("ge", "gt", "le", "lt"):
                if getattr(item, key, None) is not None:
                    limits[key] = getattr(item, key)
        out.append({"name": name, "flag": "--" + name.replace("_", "-"), "kind": kind,
                    "choices": choices, "optional": optional, "default": default,
                    "help": info.description or "", "limits": limits})
    return out


OPTION_FIELDS = option_fields()
_NUMBER = {"int": int, "float": float}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_options(form: Any) -> dict[str, Any]:
    """Form strings to option values. A value that does not parse is passed on as typed, so
    the job checker (JudgeConfig) refuses it with the CLI's message."""
    options: dict[str, Any] = {}
    for spec in OPTION_FIELDS:
        raw = _text(form.get(spec["name"])).strip()
        if spec["kind"] == "bool":
            if raw:
                options[spec["name"]] = True
            continue
        if not raw:
            continue
        if spec["kind"] in _NUMBER:
            try:
                options[spec["name"]] = _NUMBER[spec["kind"]](raw)
            except ValueError:
                options[spec["name"]] = raw
        else:
            options[spec["name"]] = raw
    for name in ("endpoint", "model"):
        raw = _text(form.get(name)).strip()
        if raw:
            options[name] = raw
    limit = _text(form.get("limit")).strip()
    if limit:
        options["limit"] = int(limit) if re.fullmatch(r"-?\d+", limit) else limit
    ids = [i for i in re.split(r"[\s,]+", _text(form.get("dialogue_ids"))) if i]
    if ids:
        options["dialogue_ids"] = ids
    return options


def _form_context(service: Service, viewer: Viewer, values: dict[str, Any],
                  errors: dict[str, str], chosen: dict[str, str]) -> dict[str, Any]:
    files = {kind: service.files.list(viewer.project_id, kind=kind, limit=200)
             for kind, _, _ in FILE_INPUTS}
    settings = service.settings
    endpoints = [{"name": name, "models": ep.models or [], "default_model": ep.default_model,
                  "max_concurrency": ep.max_concurrency}
                 for name, ep in settings.all_endpoints().items()]
    return {"files": files, "file_inputs": FILE_INPUTS, "options": OPTION_FIELDS,
            "endpoints": endpoints, "default_endpoint": settings.default_endpoint_name,
            "values": values, "errors": errors, "chosen": chosen,
            "max_upload_mb": 16}


@router.get("/runs/new", dependencies=[needs("submit")])
def submit_page(request: Request, viewer: CurrentViewer, service: ServiceDep) -> Response:
    return render(request, "submit.html", **_form_context(service, viewer, {}, {}, {}))


@router.post("/runs/new", dependencies=[needs("submit"), Depends(takes_uploads)])
async def submit(request: Request, viewer: CurrentViewer, service: ServiceDep) -> Response:
    form = await request.form()
    errors: dict[str, str] = {}
    chosen: dict[str, str] = {}
    for kind, label, required in FILE_INPUTS:
        upload = form.get(f"{kind}_file")
        picked = _text(form.get(f"{kind}_id"))
        if isinstance(upload, UploadFile) and upload.filename:
            try:
                record, _ = await run_in_threadpool(
                    service.files.add, viewer.project_id, kind, upload.filename, upload.file,
                    viewer.principal.token_id)
                chosen[kind] = record["id"]
            except ServiceError as exc:
                errors[kind] = exc.reason
        elif picked:
            chosen[kind] = picked
        elif required:
            errors[kind] = f"choose an uploaded {label.lower()} file or upload one"
    values = {k: _text(v) for k, v in form.items() if not isinstance(v, UploadFile)}
    values.pop("csrf", None)
    options = parse_options(form)
    # the options are checked even when a file is missing, so one round shows both
    placeholders: dict[str, str | list[str]] = {
        kind: chosen.get(kind, "missing") for kind, _, required in FILE_INPUTS
        if required or kind in chosen}
    try:
        job_request = JobRequest(kind="evaluate", inputs=placeholders, options=options)
        if errors:
            service.check_job(job_request)
        else:  # the placeholders are the chosen files: the API's one path, warnings and all
            submitted = await run_in_threadpool(service.submit_job, viewer.principal,
                                                job_request)
    except ServiceError as exc:
        errors[_form_field(exc.field)] = exc.reason
    except ValidationError as exc:
        problem = first_problem(exc)
        errors[_form_field(problem.path)] = problem.message
    if not errors:  # the run page shows the submission's warnings (slot names, as the API)
        return RedirectResponse(f"{PREFIX}/runs/{submitted.job['id']}", status_code=303)
    context = await run_in_threadpool(_form_context, service, viewer, values, errors,
                                      chosen)
    return render(request, "submit.html", code=422, **context)


def _form_field(field: str | None) -> str:
    """``options.top_p`` → ``top_p``, ``inputs.schema`` → ``schema``; else the whole form."""
    if not field:
        return "_form"
    head, _, rest = field.partition(".")
    if head in ("options", "inputs") and rest:
        return rest.split(".")[0].split("[")[0]
    return field
