"""The API's routes, one module per resource, and what ``create_app`` composes them with:
error handlers, the offline API reference and the finishing of the OpenAPI document."""

from fastapi import APIRouter

from . import bundles, endpoints, events, files, health, jobs, labels, results, tokens
from ._common import Admin, Reader, Reviewer, ServiceDep, Submitter, require_scope
from ._handlers import install_error_handlers
from ._openapi import build_openapi, operation_id, scopes_of
from .docs import install_docs

ROUTERS: tuple[APIRouter, ...] = (
    health.router, tokens.router, endpoints.router, files.router, jobs.router, events.router,
    results.router, bundles.router, labels.router)

TAGS = [
    {"name": "service", "description": "Liveness and readiness (no token); the details and "
     "metrics (a token with the admin scope)."},
    {"name": "tokens", "description": "Who is calling, the project's tokens and its usage."},
    {"name": "endpoints", "description": "The model endpoints a job may choose."},
    {"name": "files", "description": "Inputs: schema, dialogues, predictions, labels, rules."},
    {"name": "jobs", "description": "Evaluate, metrics, agreement, compare, audit and "
     "retry-errors jobs, queued and run by the workers."},
    {"name": "results", "description": "What a finished job made, and bundles."},
    {"name": "labels", "description": "Human labels of judged turns."},
]

__all__ = [
    "ROUTERS",
    "TAGS",
    "Admin",
    "Reader",
    "Reviewer",
    "ServiceDep",
    "Submitter",
    "build_openapi",
    "install_docs",
    "install_error_handlers",
    "operation_id",
    "require_scope",
    "scopes_of",
]
