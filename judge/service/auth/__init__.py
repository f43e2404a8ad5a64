"""Who is asking: projects, scoped bearer tokens and browser sessions, and the log filter that
keeps tokens and keys out of every log line."""

from ._auth import (
    SCOPES,
    Principal,
    TokenBook,
    create_token,
    end_session,
    ensure_project,
    has_tokens_table,
    list_tokens,
    new_id,
    open_session,
    revoke_token,
    rotate_token,
    session_alive,
)
from ._logs import log_to_stderr, redact_logs

__all__ = [
    "SCOPES",
    "Principal",
    "TokenBook",
    "create_token",
    "end_session",
    "ensure_project",
    "has_tokens_table",
    "list_tokens",
    "log_to_stderr",
    "new_id",
    "open_session",
    "redact_logs",
    "revoke_token",
    "rotate_token",
    "session_alive",
]
