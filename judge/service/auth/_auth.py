"""Projects and bearer tokens.

A token belongs to one project and carries scopes: ``read`` (see files, jobs, results),
``submit`` (upload, run, cancel, delete), ``review`` (record human labels) and ``admin``
(tokens and settings of the project; implies the others). Only the sha256 of a token is
stored: tokens are 256-bit random strings, so a plain hash cannot be searched backwards, and
lookup by hash stays one indexed query. The clear token is shown once, when it is created.
"""

from __future__ import annotations

import builtins
import hashlib
import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..._api_models import Scope
from ..._errors import OptionError, ServiceError
from ..db import Database, now, projects, tokens, web_sessions

SCOPES: tuple[Scope, ...] = ("read", "submit", "review", "admin")
_IMPLIED: dict[Scope, set[str]] = {"admin": set(SCOPES), "submit": {"read", "submit"},
                                   "review": {"read", "review"}, "read": {"read"}}
TOKEN_PREFIX = "dsj_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_id(prefix: str) -> str:
    """A short random identifier such as ``job_3f9a...`` (not guessable, not sequential)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def parse_scopes(text: str | list[str]) -> tuple[Scope, ...]:
    items = text.split(",") if isinstance(text, str) else list(text)
    named = tuple(dict.fromkeys(s.strip() for s in items if s.strip()))
    scopes = tuple(s for s in named if s in SCOPES)
    if len(scopes) < len(named) or not scopes:
        raise OptionError(f"scopes must be some of {', '.join(SCOPES)} (got {text!r})")
    return scopes


def stored_scopes(text: str) -> tuple[Scope, ...]:
    """The scopes of a token row (checked when it was created); a scope this version does not
    know grants nothing."""
    return tuple(s for s in text.split(",") if s in SCOPES)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token, its project and what it may do."""

    token_id: str
    token_name: str
    project_id: str
    project_name: str
    scopes: tuple[Scope, ...]
    spend_cap_usd: float | None = None

    def allows(self, scope: str) -> bool:
        return any(scope in _IMPLIED[s] for s in self.scopes)

    def require(self, scope: str) -> None:
        if not self.allows(scope):
            raise ServiceError(f"this token lacks the '{scope}' scope", status=403)


def has_tokens_table(db: Database) -> bool:
    """Whether ``db`` is a service database already (a new, empty one has no tables)."""
    return sa.inspect(db.engine).has_table("tokens")


def ensure_project(db: Database, name: str) -> str:
    """The id of the project called ``name``, created when missing."""
    with db.write() as conn:
        return _project_id(conn, name, create=True) or ""


def _project_id(conn: sa.Connection, name: str, *, create: bool) -> str | None:
    found = conn.execute(sa.select(projects.c.id).where(projects.c.name == name)).scalar()
    if found or not create:
        return str(found) if found else None
    project_id = new_id("prj")
    conn.execute(projects.insert().values(id=project_id, name=name, created_at=now(),
                                          settings={}))
    return project_id


def _name_taken(name: str) -> ServiceError:
    return ServiceError(f"a live token of this project is already called {name!r}; a name is "
                        "one reviewer (rotate that token for a new secret, or choose another "
                        "name)", status=409, field="name")


def create_token(db: Database, project: str, scopes: str | list[str], *, name: str | None = None,
                 spend_cap_usd: float | None = None) -> tuple[str, dict[str, Any]]:
    """Make a token for ``project`` (created if new); returns the clear token (shown once)
    and its public record. One transaction: a refused token leaves no row (nor project).
    The name of a live token is unique in its project (409): it is the reviewer."""
    chosen = parse_scopes(scopes)
    if spend_cap_usd is not None and not (math.isfinite(spend_cap_usd)
                                          and 0 <= spend_cap_usd <= 1_000_000_000):
        raise OptionError("spend cap must be a number from 0 to 1,000,000,000 USD")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = new_id("tok")
    record = {"id": token_id, "name": name or token_id, "hash": hash_token(token),
              "prefix": token[: len(TOKEN_PREFIX) + 6], "scopes": ",".join(chosen),
              "spend_cap_usd": spend_cap_usd, "created_at": now()}
    try:
        with db.write() as conn:
            record["project_id"] = _project_id(conn, project, create=True)
            if _live_token(conn, str(record["project_id"]), str(record["name"])) is not None:
                raise _name_taken(str(record["name"]))
            conn.execute(tokens.insert().values(**record))
    except sa.exc.IntegrityError:  # the same name, created at the same moment elsewhere
        raise _name_taken(str(record["name"])) from None
    return token, public_token(record | {"project": project})


def _live_token(conn: sa.Connection, project_id: str, name: str) -> Any:
    return conn.execute(sa.select(tokens).where(
        tokens.c.project_id == project_id, tokens.c.name == name,
        tokens.c.revoked_at.is_(None))).first()


def rotate_token(db: Database, project: str, name: str) -> tuple[str, dict[str, Any]]:
    """A new secret for the reviewer ``name`` of ``project``: the old token is revoked and a
    new one with the same name, scopes and spending cap takes its place, in one transaction.
    Labels and usage are keyed by the name, so they stay the reviewer's."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with db.write() as conn:
        project_id = _project_id(conn, project, create=False)
        old = _live_token(conn, project_id, name) if project_id else None
        if old is None:
            raise ServiceError(f"no live token called {name!r} in project {project!r}",
                               status=404, field="name")
        moment = now()
        conn.execute(tokens.update().where(tokens.c.id == old.id).values(revoked_at=moment))
        record = {"id": new_id("tok"), "project_id": project_id, "name": name,
                  "hash": hash_token(token), "prefix": token[: len(TOKEN_PREFIX) + 6],
                  "scopes": old.scopes, "spend_cap_usd": old.spend_cap_usd,
                  "created_at": moment}
        conn.execute(tokens.insert().values(**record))
    return token, public_token(record | {"project": project, "replaces": old.id})


def public_token(row: sa.Row[Any] | Mapping[str, Any]) -> dict[str, Any]:
    data = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)
    data.pop("hash", None)
    data["scopes"] = str(data["scopes"]).split(",")
    return data


def list_tokens(db: Database, project: str | None = None) -> list[dict[str, Any]]:
    query = (sa.select(tokens, projects.c.name.label("project"))
             .join(projects, projects.c.id == tokens.c.project_id)
             .order_by(tokens.c.created_at))
    if project is not None:
        query = query.where(projects.c.name == project)
    with db.read() as conn:
        return [public_token(row) for row in conn.execute(query)]


def revoke_token(db: Database, token_id: str, *, project_id: str | None = None) -> bool:
    """Revoke a token by id (within ``project_id`` when given); False when there is none."""
    query = tokens.update().where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
    if project_id is not None:
        query = query.where(tokens.c.project_id == project_id)
    with db.write() as conn:
        return conn.execute(query.values(revoked_at=now())).rowcount > 0


# --- browser sessions ----------------------------------------------------------------------


def open_session(db: Database, token_id: str, seconds: float) -> str:
    """A new browser session of ``token_id`` for ``seconds``; returns its id (for the
    cookie; only its hash is stored). Sessions long expired are deleted on the way."""
    session_id = secrets.token_urlsafe(32)
    moment = now()
    with db.write() as conn:
        conn.execute(web_sessions.delete().where(web_sessions.c.expires_at < moment - 86_400))
        conn.execute(web_sessions.insert().values(
            id=hash_token(session_id), token_id=token_id, created_at=moment,
            expires_at=moment + seconds))
    return session_id


_BY_SESSION = (sa.select(web_sessions.c.expires_at, web_sessions.c.ended_at, tokens,
                         projects.c.name.label("project_name"))
               .join(tokens, tokens.c.id == web_sessions.c.token_id)
               .join(projects, projects.c.id == tokens.c.project_id)
               .where(web_sessions.c.id == sa.bindparam("session", type_=sa.String)))
"""Every page's look-up: the session, the token it stands for and its project, in one query
(the browser holds the session's id only, never the token)."""


def session_alive(db: Database, session_id: str, token_id: str) -> bool:
    """Whether the session is one of ``token_id``'s, not ended (logged out) and not expired."""
    with db.query() as conn:
        row = conn.execute(_BY_SESSION, {"session": hash_token(session_id)}).first()
    return (row is not None and row.id == token_id and row.ended_at is None
            and row.expires_at > now())


def end_session(db: Database, session_id: str) -> bool:
    """End a session (logging out); False when it had ended already or never was."""
    with db.write() as conn:
        return conn.execute(web_sessions.update().where(
            web_sessions.c.id == hash_token(session_id), web_sessions.c.ended_at.is_(None))
            .values(ended_at=now())).rowcount > 0


_BY_HASH = (sa.select(tokens, projects.c.name.label("project_name"))
            .join(projects, projects.c.id == tokens.c.project_id)
            .where(tokens.c.hash == sa.bindparam("hash", type_=sa.String)))
"""Every API request's look-up, built once (not per request)."""


class TokenBook:
    """The tokens table's one reader and writer in the service: resolves bearer tokens to
    principals (remembering ``last_used_at`` at most once a minute per token so that reads
    stay reads on SQLite), lists, creates and revokes a project's tokens, and answers what the
    job store and the runners ask of a token (its spending cap, its reviewer's other tokens).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._touched: dict[str, float] = {}

    def list(self, project: str) -> list[dict[str, Any]]:
        """The project's tokens (never their hashes), oldest first."""
        return list_tokens(self.db, project)

    def create(self, project: str, scopes: str | builtins.list[str], *, name: str | None = None,
               spend_cap_usd: float | None = None) -> tuple[str, dict[str, Any]]:
        """A new token of the project: (its secret, its record)."""
        return create_token(self.db, project, scopes, name=name, spend_cap_usd=spend_cap_usd)

    def revoke(self, token_id: str, *, project_id: str) -> bool:
        """Revoke a live token of the project; False when it has none of that id."""
        return revoke_token(self.db, token_id, project_id=project_id)

    def spend_cap(self, token_id: str) -> float | None:
        """The token's spending cap in USD (None: no cap, or no such token)."""
        with self.db.read() as conn:
            cap = conn.execute(sa.select(tokens.c.spend_cap_usd)
                               .where(tokens.c.id == token_id)).scalar()
        return None if cap is None else float(cap)

    @staticmethod
    def same_reviewer(token_id: str) -> sa.Select[tuple[str]]:
        """The ids of every token with this token's name in its project, as a subquery (a
        rotated token's jobs are its reviewer's: rotating does not lift a spending cap)."""
        same = sa.select(tokens.c.project_id, tokens.c.name).where(
            tokens.c.id == token_id).subquery()
        return sa.select(tokens.c.id).join(same, sa.and_(
            tokens.c.project_id == same.c.project_id, tokens.c.name == same.c.name))

    def of_project(self, project_id: str) -> builtins.list[sa.Row[Any]]:
        """Id, name, spending cap and revocation time of the project's tokens, oldest
        first (for the usage report)."""
        with self.db.read() as conn:
            return list(conn.execute(
                sa.select(tokens.c.id, tokens.c.name, tokens.c.spend_cap_usd,
                          tokens.c.revoked_at).where(tokens.c.project_id == project_id)
                .order_by(tokens.c.created_at)))

    def resolve(self, authorization: str | None) -> Principal:
        if not authorization:
            raise ServiceError("missing bearer token (Authorization: Bearer <token>)",
                               status=401)
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ServiceError("expected 'Authorization: Bearer <token>'", status=401)
        return self.resolve_token(token.strip())

    def resolve_token(self, token: str) -> Principal:
        with self.db.query() as conn:
            row = conn.execute(_BY_HASH, {"hash": hash_token(token)}).first()
        if row is None or row.revoked_at is not None:
            raise ServiceError("invalid or revoked token", status=401)
        return self._principal(row)

    def _principal(self, row: sa.Row[Any]) -> Principal:
        """The principal of a token's row (joined with its project's name), its use noted."""
        moment = now()
        if moment - self._touched.get(row.id, 0.0) > 60:
            self._touched[row.id] = moment
            with self.db.write() as conn:
                conn.execute(tokens.update().where(tokens.c.id == row.id)
                             .values(last_used_at=moment))
        return Principal(row.id, row.name, row.project_id, row.project_name,
                         stored_scopes(str(row.scopes)), row.spend_cap_usd)

    # browser sessions (the web interface's), kept beside the tokens they stand for

    def session_principal(self, session_id: str) -> Principal:
        """The principal of a browser session, asked on every page (so an ended session or a
        revoked token is refused by every replica at once): 401 when the session is unknown,
        ended (logged out) or expired, or its token was revoked."""
        with self.db.query() as conn:
            row = conn.execute(_BY_SESSION, {"session": hash_token(session_id)}).first()
        if row is None or row.ended_at is not None or row.expires_at <= now():
            raise ServiceError("please log in with your token", status=401)
        if row.revoked_at is not None:
            raise ServiceError("your token was revoked; log in with another", status=401)
        return self._principal(row)

    def open_session(self, token_id: str, seconds: float) -> str:
        return open_session(self.db, token_id, seconds)

    def end_session(self, session_id: str) -> bool:
        return end_session(self.db, session_id)
