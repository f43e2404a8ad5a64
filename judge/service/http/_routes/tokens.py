"""Who is calling (``/v1/me``), the project's tokens and its usage."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Response, status
from fastapi.openapi.models import Link

from ...._api_models import Me, NewToken, ProjectRef, Token, TokenList, TokenRequest, Usage
from ...._errors import ServiceError
from ._common import Admin, Reader, ServiceDep, api_router, errors

router = api_router("tokens")


@router.get("/me", response_model=Me)
def get_me(principal: Reader) -> Me:
    """The token's name, project and scopes."""
    return Me(token_id=principal.token_id, name=principal.token_name,
              project=ProjectRef(id=principal.project_id, name=principal.project_name),
              scopes=list(principal.scopes),
              spend_cap_usd=principal.spend_cap_usd)


@router.get("/usage", response_model=Usage)
def get_usage(principal: Reader, service: ServiceDep) -> Usage:
    """Cost and tokens per token and for the project."""
    return Usage.model_validate(service.jobs.usage(principal.project_id))


@router.get("/tokens", response_model=TokenList, responses=errors(403))
def list_tokens(principal: Admin, service: ServiceDep) -> TokenList:
    """The project's tokens (never their secrets)."""
    return TokenList(tokens=[Token.model_validate(t)
                             for t in service.tokens.list(principal.project_name)])


@router.post("/tokens", status_code=status.HTTP_201_CREATED, response_model=NewToken,
             responses={201: {"description": "The token with its secret (shown this once).",
                              "links": {"revoke_token": Link(
                                  operationId="revoke_token",
                                  parameters={"token_id": "$response.body#/id"},
                                  description="Revoke the token just made.")}},
                        **errors(403, 409, 422)})
def create_token(principal: Admin, service: ServiceDep,
                         request: TokenRequest) -> NewToken:
    """A new token of the project; its secret is in this answer only."""
    token, record = service.tokens.create(principal.project_name, list(request.scopes),
                                          name=request.name,
                                          spend_cap_usd=request.spend_cap_usd)
    return NewToken.model_validate({**record, "token": token})


@router.delete("/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT,
               response_class=Response, responses=errors(403, 404, 422))
def revoke_token(principal: Admin, service: ServiceDep,
                            token_id: Annotated[str, Path(max_length=40)]) -> Response:
    """Revoke a token of the project."""
    if not service.tokens.revoke(token_id, project_id=principal.project_id):
        raise ServiceError(f"no active token {token_id!r} in this project", status=404)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
