"""What every router of the API shares: the service and the caller as dependencies, the error
responses each route documents, and the router factory that puts authentication on every
route of a resource (so no handler can forget it)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...._api_models import Scope
from ...auth import Principal
from .._service import Service

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", bearerFormat="dsj_...",
    description="A token from `dst-judge serve token create` or `POST /v1/tokens`: "
    "`Authorization: Bearer <token>`. It belongs to one project and carries scopes.")


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


def authenticate(request: Request, service: ServiceDep,
                 credentials: Annotated[HTTPAuthorizationCredentials | None,
                                        Security(bearer)] = None) -> Principal:
    """The token's principal (401 without a valid one): the one the guard resolved before the
    body was read, or resolved here. ``credentials`` is what declares the bearer scheme in the
    OpenAPI document; the header itself is read whole, so a malformed one gets its own
    message."""
    principal: Principal | None = request.scope.get("state", {}).get("principal")
    if principal is None:
        principal = service.tokens.resolve(request.headers.get("authorization"))
    return principal


class require_scope:
    """A dependency giving the caller's principal once it holds ``scope`` (else 403). The
    request guard reads ``required_scope`` to refuse a caller before the body is read."""

    def __init__(self, scope: Scope) -> None:
        self.required_scope = scope

    def __call__(self, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        principal.require(self.required_scope)
        return principal


Reader = Annotated[Principal, Depends(require_scope("read"))]
Submitter = Annotated[Principal, Depends(require_scope("submit"))]
Reviewer = Annotated[Principal, Depends(require_scope("review"))]
Admin = Annotated[Principal, Depends(require_scope("admin"))]

_MEANINGS = {
    400: "The body cannot be parsed (malformed multipart data or encoding).",
    401: "No token, or an invalid or revoked one.",
    403: "The token lacks the scope (or its spending cap is reached).",
    408: "The body did not arrive in time (a stalled or too slow client).",
    404: "No such thing in the token's project (another project's is the same as none).",
    409: "The thing is in a state that does not allow it.",
    410: "The content was deleted meanwhile.",
    413: "The request body is larger than the server's limit.",
    422: "The request is not valid; `field` names the part at fault.",
    429: "Too many requests; wait `Retry-After` seconds.",
    503: "The server cannot serve it now (database unreachable, or shutting down).",
}


ERROR_REF = {"$ref": "#/components/schemas/Error"}
"""The :class:`Error` schema (put in the document's components by ``build_openapi``)."""


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses for these error statuses, each with the :class:`Error` body as JSON
    (named explicitly: FastAPI would give a ``model`` the media type of the route's own
    response, ``text/event-stream`` say)."""
    return {code: {"description": _MEANINGS[code],
                   "content": {"application/json": {"schema": ERROR_REF}}} for code in codes}


def api_router(tag: str) -> APIRouter:
    """A router of ``/v1`` routes: every route needs a valid token (its scope is asked by the
    handler's ``Reader``/``Submitter``/... parameter) and may answer 401 or 429."""
    return APIRouter(prefix="/v1", tags=[tag], dependencies=[Depends(authenticate)],
                     responses=errors(401, 429))
