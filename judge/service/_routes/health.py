"""``/healthz`` (liveness), ``/readyz`` (readiness) and ``/metrics``: for process supervisors,
load balancers and Prometheus, no token."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from ..._api_models import Health, Readiness
from ..._version import __version__
from ..queue import readiness
from ._common import ServiceDep

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=Health)
def get_health(service: ServiceDep) -> Health:
    """Liveness: 200 while the process answers. Whether it can do work is ``/readyz``."""
    ok = service.db.ping()
    worker = service.worker
    return Health(status="ok", version=__version__, database="ok" if ok else "unreachable",
                  worker=None if worker is None else worker.status())


@router.get("/readyz", response_model=Readiness,
            responses={503: {"model": Readiness, "description": "Draining, the database "
                             "unreachable, the schema not at head, or this replica's workers "
                             "gone: send requests elsewhere."}})
def get_readiness(service: ServiceDep) -> JSONResponse:
    """Readiness: 503 with the reason while draining, without the database, with a schema not
    at head, or with this replica's workers gone."""
    ready, reason = readiness(service)
    answer = Readiness(status="ready" if ready else "unavailable", reason=reason)
    return JSONResponse(answer.model_dump(mode="json"), status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"description": "Prometheus text: requests and latency by route, "
                             "jobs by status, live workers, this replica's running jobs, calls "
                             "in flight, pool grants."}})
def get_metrics(service: ServiceDep) -> Response:
    """Prometheus text: requests and latency by route, jobs by status, live workers, this
    replica's running jobs, calls in flight, pool grants."""
    data, content_type = service.metrics.render()
    return Response(data, media_type=content_type)
