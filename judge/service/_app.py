"""The HTTP API (FastAPI; OpenAPI schema at ``/openapi.json``, docs at ``/docs``).

Every route under ``/v1`` needs a bearer token; what it may touch is its own project's data
(anything else is a 404, never a 403, so ids of other projects cannot be probed) and what its
scopes allow (403). Errors are JSON: ``{"error": {"status", "message", "field"}}`` where
``field`` is a JSON path into the request (``options.base_url``, ``inputs.schema``).

Handlers are plain functions run in FastAPI's thread pool against the synchronous SQLAlchemy
engine; long work never happens here (jobs run in the worker), so the API stays fast under a
full queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, File, Form, Header, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._errors import ServiceError
from .._version import __version__
from ._auth import Principal, TokenBook, create_token, list_tokens, revoke_token
from ._bundles import export_bundle, import_bundle
from ._db import Database, DatabaseUnavailable
from ._files import FileStore
from ._guard import RequestGuard
from ._jobs import FINAL, JobStore, public_job
from ._jobspec import JobRequest, check_job
from ._labels import LabelStore
from ._metrics import ServiceMetrics
from ._settings import ServiceSettings
from ._slotcheck import job_warnings
from .queue import readiness

log = logging.getLogger("dst_judge.service")


class Service:
    """Everything a request handler needs, built once per app."""

    def __init__(self, settings: ServiceSettings, *, run_worker: bool = True) -> None:
        self.settings = settings
        self.db = Database(settings.db_url)
        self.files = FileStore(self.db, settings.data_dir, max_upload=settings.max_upload_bytes,
                               max_unpacked=settings.max_unpacked_bytes,
                               caps=settings.upload_caps())
        self.jobs = JobStore(self.db)
        self.labels = LabelStore(self.db)
        self.tokens = TokenBook(self.db)
        self.metrics = ServiceMetrics(self)
        self.run_worker = run_worker and settings.job_slots > 0
        self.worker: Any = None
        self.closing = False

    def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db.migrate()
        if self.run_worker:
            from .queue import Worker, WorkerProcesses

            if self.settings.worker_mode == "process":
                self.worker = WorkerProcesses(self.settings)
            else:
                self.worker = Worker(self.db, self.settings, self.files, self.jobs)
            self.worker.start()

    def drain(self) -> None:
        """SIGTERM: stop claiming and sending at once (the rest happens in :meth:`stop`)."""
        self.closing = True
        if self.worker is not None:
            self.worker.drain()

    def stop(self) -> None:
        self.closing = True
        if self.worker is not None:
            self.worker.stop()
        self.db.dispose()


def _error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"status": status, "message": message, "field": field}}


def _type_part(part: Any) -> bool:
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


# --- request and response models (for the OpenAPI schema) ---------------------------------------


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    name: str = Field(min_length=1, max_length=200)
    scopes: list[Literal["read", "submit", "review", "admin"]] = Field(min_length=1, max_length=4)
    spend_cap_usd: float | None = Field(None, ge=0, le=1_000_000_000)


class ResumeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    budget: float | None = Field(None, gt=0, le=1_000_000,
                                 description="New budget in USD (stopped jobs).")


class LabelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    dialogue_id: str = Field(min_length=1, max_length=300)
    turn_index: int = Field(ge=0, le=2 ** 31 - 1)
    slot: str = Field("", max_length=200, description="'' labels the whole turn.")
    label: Literal["correct", "incorrect", "unsure"]
    note: str | None = Field(None, max_length=5000)
    job_id: str | None = Field(None, max_length=40, description=(
        "The judge run whose turn is labelled; the label belongs to its predictions."))
    predictions: str | None = Field(None, max_length=40, description=(
        "Or the id of the predictions file whose turn state is labelled."))


# --- who is calling -----------------------------------------------------------------------------


def _caller(scope: str) -> Any:
    def dependency(request: Request,
                   authorization: Annotated[str | None, Header()] = None) -> Principal:
        principal = request.scope.get("state", {}).get("principal")  # RequestGuard's
        if principal is None:
            principal = request.app.state.service.tokens.resolve(authorization)
        principal.require(scope)
        return principal
    dependency.required_scope = scope  # type: ignore[attr-defined]  # read by RequestGuard
    return Depends(dependency)


Reader = Annotated[Principal, _caller("read")]
Submitter = Annotated[Principal, _caller("submit")]
Reviewer = Annotated[Principal, _caller("review")]
Admin = Annotated[Principal, _caller("admin")]


# --- the app -------------------------------------------------------------------------------------


def create_app(settings: ServiceSettings, *, run_worker: bool = True) -> FastAPI:
    """The service app; the database is migrated and the worker started on startup."""
    service = Service(settings, run_worker=run_worker)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(service.start)
        try:
            yield
        finally:
            await asyncio.to_thread(service.stop)

    app = FastAPI(title="dst-judge service", version=__version__, lifespan=lifespan,
                  description="Score dialogue state tracking systems with an LLM judge and "
                  "the exact-match metric suite, as a shared service.")
    app.state.service = service
    app.add_middleware(RequestGuard, service=service)
    _errors(app)

    @app.get("/healthz", tags=["service"])
    def healthz() -> JSONResponse:
        """Liveness: the process answers (whether it can work: ``/readyz``)."""
        ok = service.db.ping()
        worker = service.worker
        body = {"status": "ok", "version": __version__,
                "database": "ok" if ok else "unreachable",
                "worker": None if worker is None else worker.status()}
        return JSONResponse(body)

    @app.get("/readyz", tags=["service"])
    def readyz() -> JSONResponse:
        """Readiness: 503 with the reason while draining, without the database, with a
        schema not at head, or with this replica's workers gone."""
        ready, reason = readiness(service)
        return JSONResponse({"status": "ready" if ready else "unavailable", "reason": reason},
                            status_code=200 if ready else 503)

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def metrics() -> Response:
        data, content_type = service.metrics.render()
        return Response(data, media_type=content_type)

    @app.get("/v1/me", tags=["auth"])
    def me(principal: Reader) -> dict[str, Any]:
        return {"token_id": principal.token_id, "name": principal.token_name,
                "project": {"id": principal.project_id, "name": principal.project_name},
                "scopes": list(principal.scopes), "spend_cap_usd": principal.spend_cap_usd}

    @app.get("/v1/endpoints", tags=["service"])
    def endpoints(principal: Reader) -> dict[str, Any]:
        items = [{"name": name, "models": ep.models, "default_model": ep.default_model,
                  "rpm": ep.rpm, "tpm": ep.tpm, "max_concurrency": ep.max_concurrency}
                 for name, ep in settings.all_endpoints().items()]
        return {"default": settings.default_endpoint_name, "endpoints": items}

    # --- files ---

    @app.post("/v1/files", tags=["files"], status_code=201)
    def upload(principal: Submitter, file: Annotated[UploadFile, File()],
               kind: Annotated[str, Form()], name: Annotated[str | None, Form()] = None
               ) -> JSONResponse:
        record, new = service.files.add(principal.project_id, kind, name or file.filename,
                                        file.file, principal.token_id)
        return JSONResponse(record, status_code=201 if new else 200)

    @app.get("/v1/files", tags=["files"])
    def list_files(principal: Reader, kind: str | None = None,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                   offset: Annotated[int, Query(ge=0)] = 0) -> dict[str, Any]:
        return {"files": service.files.list(principal.project_id, kind=kind, limit=limit,
                                            offset=offset)}

    @app.get("/v1/files/{file_id}", tags=["files"])
    def get_file(principal: Reader, file_id: str) -> dict[str, Any]:
        return service.files.get(principal.project_id, file_id)

    @app.get("/v1/files/{file_id}/content", tags=["files"])
    def file_content(principal: Reader, file_id: str) -> StreamingResponse:
        record = service.files.get(principal.project_id, file_id)
        return StreamingResponse(service.files.open_content(record["sha256"]),
                                 media_type="application/octet-stream",
                                 headers=_attachment(record["name"]))

    @app.delete("/v1/files/{file_id}", tags=["files"], status_code=204)
    def delete_file(principal: Submitter, file_id: str) -> Response:
        service.jobs.refuse_if_in_use(principal.project_id, file_id)
        service.files.delete(principal.project_id, file_id)
        return Response(status_code=204)

    # --- jobs ---

    @app.post("/v1/jobs", tags=["jobs"], status_code=201)
    def submit(principal: Submitter, request: JobRequest) -> JSONResponse:
        spec = check_job(request, settings)
        job = service.jobs.submit(principal, spec)
        job["warnings"] = job_warnings(service.files, principal.project_id, spec.kind,
                                       spec.inputs)
        if service.worker is not None:
            service.worker.nudge()
        return JSONResponse(job, status_code=201,
                            headers={"Location": f"/v1/jobs/{job['id']}"})

    @app.get("/v1/jobs", tags=["jobs"])
    def list_jobs(principal: Reader,
                  status: Literal["queued", "running", "waiting", "succeeded", "failed",
                                  "cancelled", "stopped"] | None = None,
                  kind: str | None = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                  offset: Annotated[int, Query(ge=0)] = 0) -> dict[str, Any]:
        return {"jobs": service.jobs.list(principal.project_id, status=status, kind=kind,
                                          limit=limit, offset=offset)}

    @app.get("/v1/jobs/{job_id}", tags=["jobs"])
    def get_job(principal: Reader, job_id: str) -> dict[str, Any]:
        return service.jobs.get(principal.project_id, job_id)

    @app.post("/v1/jobs/{job_id}/cancel", tags=["jobs"])
    def cancel_job(principal: Submitter, job_id: str) -> dict[str, Any]:
        return service.jobs.cancel(principal.project_id, job_id)

    @app.post("/v1/jobs/{job_id}/resume", tags=["jobs"])
    def resume_job(principal: Submitter, job_id: str,
                   request: Annotated[ResumeRequest | None, Body()] = None) -> dict[str, Any]:
        job = service.jobs.resume(principal.project_id, job_id,
                                  request.budget if request else None)
        if service.worker is not None:
            service.worker.nudge()
        return job

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], status_code=204)
    def delete_job(principal: Submitter, job_id: str) -> Response:
        service.jobs.delete(principal.project_id, job_id)
        return Response(status_code=204)

    @app.get("/v1/jobs/{job_id}/events", tags=["jobs"])
    async def job_events(principal: Reader, job_id: str, request: Request) -> StreamingResponse:
        await asyncio.to_thread(service.jobs.row, principal.project_id, job_id)
        return StreamingResponse(_events(service, principal.project_id, job_id, request),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})

    @app.get("/v1/jobs/{job_id}/results", tags=["results"])
    def job_results(principal: Reader, job_id: str) -> JSONResponse:
        row = service.jobs.row(principal.project_id, job_id)
        if row.summary is None:
            raise ServiceError(f"job is {row.status}; results exist once it has finished",
                               status=409)
        return JSONResponse(row.summary)

    @app.get("/v1/jobs/{job_id}/judgments", tags=["results"])
    def job_judgments(principal: Reader, job_id: str, verdict: bool | None = None,
                      error: bool | None = None, dialogue_id: str | None = None,
                      offset: Annotated[int, Query(ge=0)] = 0,
                      limit: Annotated[int | None, Query(ge=1)] = None) -> StreamingResponse:
        rows = service.jobs.judgments(principal.project_id, job_id, verdict=verdict,
                                      error=error, dialogue_id=dialogue_id, offset=offset,
                                      limit=limit)
        first = list(_take(rows, 1))  # 404 before the stream starts

        def lines() -> Iterator[bytes]:
            for row in (*first, *rows):
                yield (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.get("/v1/jobs/{job_id}/artifacts/{name}", tags=["results"])
    def job_artifact(principal: Reader, job_id: str, name: str) -> Response:
        content_type, data = service.jobs.artifact(principal.project_id, job_id, name)
        headers = {**_attachment(name), "Content-Security-Policy": "sandbox allow-scripts",
                   "X-Content-Type-Options": "nosniff"}
        return Response(data, media_type=content_type, headers=headers)

    @app.get("/v1/jobs/{job_id}/export", tags=["results"])
    def job_export(principal: Reader, job_id: str) -> Response:
        name, data = export_bundle(service, principal.project_id, job_id)
        return Response(data, media_type="application/gzip", headers=_attachment(name))

    @app.post("/v1/bundles", tags=["results"], status_code=201)
    def bundle_import(principal: Submitter, file: Annotated[UploadFile, File()]
                      ) -> JSONResponse:
        job = import_bundle(service, principal, file.file)
        return JSONResponse(job, status_code=201)

    # --- usage, tokens, labels ---

    @app.get("/v1/usage", tags=["service"])
    def usage(principal: Reader) -> dict[str, Any]:
        return service.jobs.usage(principal.project_id)

    @app.get("/v1/tokens", tags=["auth"])
    def tokens_list(principal: Admin) -> dict[str, Any]:
        return {"tokens": list_tokens(service.db, principal.project_name)}

    @app.post("/v1/tokens", tags=["auth"], status_code=201)
    def tokens_create(principal: Admin, request: TokenRequest) -> JSONResponse:
        token, record = create_token(service.db, principal.project_name, list(request.scopes),
                                     name=request.name, spend_cap_usd=request.spend_cap_usd)
        return JSONResponse({**record, "token": token}, status_code=201)

    @app.delete("/v1/tokens/{token_id}", tags=["auth"], status_code=204)
    def tokens_revoke(principal: Admin, token_id: str) -> Response:
        if not revoke_token(service.db, token_id, project_id=principal.project_id):
            raise ServiceError(f"no active token {token_id!r} in this project", status=404)
        return Response(status_code=204)

    def subject_of(project_id: str, job_id: str | None, predictions: str | None) -> str | None:
        """What labels are about: the predictions of a judge run or of a predictions file."""
        subject = None
        if job_id is not None:
            subject = service.labels.subject_of_job(project_id, job_id)
        if predictions is not None:
            sha = service.labels.subject_of_file(project_id, predictions)
            if subject is not None and sha != subject:
                raise ServiceError(f"job {job_id!r} judged other predictions than file "
                                   f"{predictions!r}", status=422, field="predictions")
            subject = sha
        return subject

    @app.put("/v1/labels", tags=["labels"])
    def put_label(principal: Reviewer, request: LabelRequest) -> dict[str, Any]:
        subject = subject_of(principal.project_id, request.job_id, request.predictions)
        if subject is None:
            raise ServiceError("say what the label judges: job_id (a judge run) or "
                               "predictions (a predictions file id)", status=422,
                               field="job_id")
        values = request.model_dump(exclude={"predictions"})
        return service.labels.put(principal, {**values, "subject": subject})

    @app.get("/v1/labels", tags=["labels"])
    def get_labels(principal: Reader, job_id: str | None = None,
                   predictions: str | None = None, reviewer: str | None = None,
                   format: Literal["json", "labels"] = "json") -> Response:
        subject = subject_of(principal.project_id, job_id, predictions)
        if subject is None and format == "labels":
            raise ServiceError("a labels file holds the labels of one predictions file: give "
                               "job_id or predictions", status=422, field="job_id")
        items = service.labels.list(principal.project_id, subject=subject, reviewer=reviewer)
        if format == "labels":
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n"
                           for r in service.labels.as_label_file(items))
            return Response(text, media_type="application/x-ndjson",
                            headers=_attachment("labels.jsonl"))
        return JSONResponse({"labels": items})

    @app.delete("/v1/labels/{label_id}", tags=["labels"], status_code=204)
    def delete_label(principal: Reviewer, label_id: int) -> Response:
        service.labels.delete(principal, label_id)
        return Response(status_code=204)

    return app


def _take(rows: Iterator[Any], count: int) -> Iterator[Any]:
    for _ in range(count):
        try:
            yield next(rows)
        except StopIteration:
            return


def _attachment(name: str) -> dict[str, str]:
    safe = "".join(c for c in name if c.isalnum() or c in "._-") or "download"
    return {"Content-Disposition": f'attachment; filename="{safe}"'}


async def _events(service: Service, project_id: str, job_id: str,
                  request: Request) -> AsyncIterator[bytes]:
    """Server-sent events: ``progress`` whenever the job changes, ``end`` when it is final.
    Read from the database, so any replica can serve the stream of any job."""
    last: Any = None
    quiet = 0.0
    serial = 0
    while not service.closing:
        try:
            row = await asyncio.to_thread(service.jobs.row, project_id, job_id)
        except DatabaseUnavailable:  # an outage is not a deleted job: look again
            await asyncio.sleep(1.0)
            continue
        except ServiceError:
            yield b"event: end\ndata: {\"status\": \"deleted\"}\n\n"
            return
        job = public_job(row)
        key = (job["status"], job["progress"], job["updated_at"])
        if key != last:
            last = key
            serial += 1
            event = "end" if job["status"] in FINAL else "progress"
            yield (f"id: {serial}\nevent: {event}\ndata: "
                   f"{json.dumps(job, ensure_ascii=False)}\n\n").encode()
            quiet = 0.0
            if event == "end":
                return
        elif quiet >= 15.0:
            yield b": keep-alive\n\n"
            quiet = 0.0
        if await request.is_disconnected():
            return
        await asyncio.sleep(0.5)
        quiet += 0.5


def _errors(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(_error_body(exc.status, exc.reason, exc.field),
                            status_code=exc.status,
                            headers={"WWW-Authenticate": "Bearer"} if exc.status == 401 else None)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        parts = [p for p in first.get("loc", ()) if not _type_part(p)]
        if parts and parts[0] in ("body", "query", "path", "header"):
            parts = parts[1:] or parts
        field = ""
        for part in parts:
            field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
        return JSONResponse(_error_body(422, str(first.get("msg")), field or None),
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(_error_body(exc.status_code, str(exc.detail)),
                            status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(_error_body(500, "internal error in the server (see its log)"),
                            status_code=500)
