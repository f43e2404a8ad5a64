"""The HTTP front: the FastAPI app and its routes, the request guard in front of them, the
uvicorn server, the streamed responses, ``/metrics``, bundles (a finished job exported and
imported elsewhere), and the service object every handler reaches (``app.state.service``).
Nothing else in the service imports this package."""

from ._app import create_app
from ._bundles import export_bundle
from ._guard import Gate, Refusal, gated, note_auth_failure, uploading
from ._routes._common import ServiceDep, get_service
from ._server import listening_socket, run_server
from ._service import Service, SubmittedJob
from ._streams import (
    GzipResponse,
    NDJSONResponse,
    ServerEvent,
    attachment,
    event_stream,
    json_lines,
    server_sent_events,
)

__all__ = [
    "Gate",
    "GzipResponse",
    "NDJSONResponse",
    "Refusal",
    "ServerEvent",
    "Service",
    "ServiceDep",
    "SubmittedJob",
    "attachment",
    "create_app",
    "event_stream",
    "export_bundle",
    "gated",
    "get_service",
    "json_lines",
    "listening_socket",
    "note_auth_failure",
    "run_server",
    "server_sent_events",
    "uploading",
]
