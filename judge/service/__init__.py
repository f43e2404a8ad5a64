"""The evaluation service (``dst-judge serve``, extra ``dst-judge[serve]``): an HTTP API over a
durable job queue in SQLite or Postgres, with projects and scoped tokens, content-addressed
uploads, leases that survive a dead replica, and one rate-limit pool per endpoint."""

from ._app import create_app
from ._auth import (
    SCOPES,
    Principal,
    create_token,
    end_session,
    ensure_project,
    has_tokens_table,
    list_tokens,
    open_session,
    revoke_token,
    rotate_token,
    session_alive,
)
from ._bundles import export_bundle
from ._copy import copy_database
from ._db import Database, describe_database, private_folder
from ._decisions import (
    candidate_id,
    corrections_records,
    may_adjudicate,
    outcomes,
    progress,
    reviewer_agreement,
)
from ._guard import Gate, Refusal, gated, note_auth_failure, uploading
from ._jobs import EXIT_MEANINGS
from ._jobspec import JobRequest, check_job
from ._labels import job_subject, predictions_sha256
from ._lifecycle import ACTIVE, FINAL, STATUSES, WITH_RESULTS, JobStatus
from ._reads import JudgmentReads
from ._routes._common import ServiceDep, get_service
from ._rows import JobRow
from ._samples import ESTIMATE, ReviewSamples, separate_name
from ._server import listening_socket, run_server
from ._service import Service, SubmittedJob
from ._settings import (
    DEFAULT_PORT,
    ENV_PREFIX,
    EndpointConfig,
    ServiceSettings,
    build_settings,
    default_data_dir,
    read_endpoints_file,
    replay_endpoint,
)
from ._slotcheck import job_warnings
from ._streams import (
    GzipResponse,
    NDJSONResponse,
    ServerEvent,
    attachment,
    event_stream,
    json_lines,
    server_sent_events,
)
from .queue import run_workers

__all__ = [
    "ACTIVE",
    "DEFAULT_PORT",
    "ENV_PREFIX",
    "ESTIMATE",
    "EXIT_MEANINGS",
    "FINAL",
    "SCOPES",
    "STATUSES",
    "WITH_RESULTS",
    "Database",
    "EndpointConfig",
    "Gate",
    "GzipResponse",
    "JobRequest",
    "JobRow",
    "JobStatus",
    "JudgmentReads",
    "NDJSONResponse",
    "Principal",
    "Refusal",
    "ReviewSamples",
    "ServerEvent",
    "Service",
    "ServiceDep",
    "ServiceSettings",
    "SubmittedJob",
    "attachment",
    "build_settings",
    "candidate_id",
    "check_job",
    "copy_database",
    "corrections_records",
    "create_app",
    "create_token",
    "default_data_dir",
    "describe_database",
    "end_session",
    "ensure_project",
    "event_stream",
    "export_bundle",
    "gated",
    "get_service",
    "has_tokens_table",
    "job_subject",
    "job_warnings",
    "json_lines",
    "list_tokens",
    "listening_socket",
    "may_adjudicate",
    "note_auth_failure",
    "open_session",
    "outcomes",
    "predictions_sha256",
    "private_folder",
    "progress",
    "read_endpoints_file",
    "replay_endpoint",
    "reviewer_agreement",
    "revoke_token",
    "rotate_token",
    "run_server",
    "run_workers",
    "separate_name",
    "server_sent_events",
    "session_alive",
    "uploading",
]
