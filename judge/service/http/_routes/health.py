"""``/healthz`` (liveness), ``/readyz`` (readiness) and ``/metrics``: for process supervisors,
load balancers and Prometheus.

What a probe without a token may learn is whether the process answers (``/healthz``: its
status only) and whether it should get traffic (``/readyz``: ready or not, by its status
code). The rest names things of the machine or of every project (the worker's host and process
id, the database's state and the first line of its error, which can name the SQLite file's path
or a Postgres host and user, job counts across all projects): ``/healthz`` and ``/readyz`` add
it for a token with the ``admin`` scope, and ``/metrics`` answers only such a token (a
Prometheus scrape sends it as a bearer token)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from ...._api_models import Health, Readiness
from ...._errors import ServiceError
from ...._version import __version__
from ...queue import readiness
from .._service import Service
from ._common import Admin, ServiceDep, errors

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=Health)
def get_health(request: Request, service: ServiceDep) -> Health | JSONResponse:
    """Liveness: 200 while the process answers, whatever the token. Without a token that has
    the ``admin`` scope only ``status``; with one also the version, the database and this
    replica's worker. Whether it can do work is ``/readyz``."""
    if not _admin(service, request.headers.get("authorization")):
        return JSONResponse({"status": "ok"})
    ok = service.db.ping()
    worker = service.worker
    return Health(status="ok", version=__version__, database="ok" if ok else "unreachable",
                  worker=None if worker is None else worker.status())


def _admin(service: Service, authorization: str | None) -> bool:
    """Whether the header holds a live token with the admin scope (a probe's liveness never
    depends on it: no token, a wrong one or an outage all mean the short answer)."""
    if not authorization:
        return False
    try:
        return service.tokens.resolve(authorization).allows("admin")
    except ServiceError:
        return False


@router.get("/readyz", response_model=Readiness,
            responses={503: {"model": Readiness, "description": "Draining, the database "
                             "unreachable, the schema not at head, or this replica's workers "
                             "gone: send requests elsewhere."}})
def get_readiness(request: Request, service: ServiceDep) -> JSONResponse:
    """Readiness: 503 while draining, without the database, with a schema not at head, or with
    this replica's workers gone. The reason only for a token with the ``admin`` scope."""
    ready, reason = readiness(service)
    shown = reason if _admin(service, request.headers.get("authorization")) else None
    answer = Readiness(status="ready" if ready else "unavailable", reason=shown)
    return JSONResponse(answer.model_dump(mode="json"), status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"description": "Prometheus text: requests and latency by route, "
                             "jobs by status, live workers, this replica's running jobs, calls "
                             "in flight, pool grants."}, **errors(401, 403, 429)})
def get_metrics(service: ServiceDep, _caller: Admin) -> Response:
    """Prometheus text (a token with the ``admin`` scope): requests and latency by route, jobs
    by status, live workers, this replica's running jobs, calls in flight, pool grants."""
    data, content_type = service.metrics.render()
    return Response(data, media_type=content_type)
