"""``/v1/endpoints``: the model endpoints a job may choose."""

from __future__ import annotations

from ...._api_models import Endpoint, EndpointList
from ._common import Reader, ServiceDep, api_router

router = api_router("endpoints")


@router.get("/endpoints", response_model=EndpointList)
def list_endpoints(principal: Reader, service: ServiceDep) -> EndpointList:
    """Endpoint names, their models and limits (no URLs, no keys)."""
    settings = service.settings
    items = [Endpoint(name=name, models=ep.models, default_model=ep.default_model, rpm=ep.rpm,
                      tpm=ep.tpm, max_concurrency=ep.max_concurrency)
             for name, ep in settings.all_endpoints().items()]
    return EndpointList(default=settings.default_endpoint_name, endpoints=items)
