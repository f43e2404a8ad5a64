"""``/healthz`` and ``/metrics``: for load balancers and Prometheus, no token."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from ..._api_models import Health
from ..._version import __version__
from ._common import ServiceDep

router = APIRouter(tags=["service"])


@router.get("/healthz", response_model=Health,
            responses={503: {"model": Health, "description": "The database is unreachable or "
                             "the replica is draining: send requests elsewhere."}})
def get_health(service: ServiceDep) -> JSONResponse:
    """Whether this replica can serve: 503 when the database is unreachable or the replica
    is draining."""
    ok = service.db.ping()
    worker = service.worker
    health = Health(status="ok" if ok else "unavailable", version=__version__,
                    database="ok" if ok else "unreachable",
                    worker=None if worker is None else worker.status())
    return JSONResponse(health.model_dump(mode="json"),
                        status_code=200 if ok and not service.closing else 503)


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"description": "Prometheus text: requests and latency by route, "
                             "jobs by status, live workers, this replica's running jobs, calls "
                             "in flight, pool grants."}})
def get_metrics(service: ServiceDep) -> Response:
    """Prometheus text: requests and latency by route, jobs by status, live workers, this
    replica's running jobs, calls in flight, pool grants."""
    data, content_type = service.metrics.render()
    return Response(data, media_type=content_type)
