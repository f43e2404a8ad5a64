"""Who is behind a page: the session cookie's contents and the viewer it resolves to.

The cookie holds a session's id and nothing else, sealed with Fernet (AES-CBC + HMAC, with its
issue time), so a cookie expires after :data:`SESSION_SECONDS` and cannot be forged or
altered. The session is a row of the database (only the id's sha256 is stored) that names the
token it stands for: the browser never holds the token, so a stolen cookie opens the
interface until the session ends but gives nothing that works on the API. Every request looks
the session and its token up, so a revoked token or a logged-out session is refused at once,
by every replica. The session's CSRF token is derived from its id with the key (HMAC), so it
is stored nowhere and differs for every session.

The key: ``DST_JUDGE_WEB_SECRET`` when set (give every replica the same value), otherwise a
random key kept in ``<data dir>/web-secret`` (mode 0600).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from fastapi import Request

from .._errors import ServiceError
from ..service import Principal, Service, private_folder

COOKIE = "dsj_session"
SESSION_SECONDS = 12 * 3600
SECRET_ENV = "DST_JUDGE_WEB_SECRET"


def _fernet_key(secret: bytes) -> bytes:
    return base64.urlsafe_b64encode(hashlib.sha256(b"dst-judge web session\0" + secret).digest())


def _csrf_key(secret: bytes) -> bytes:
    return hashlib.sha256(b"dst-judge web csrf\0" + secret).digest()


def load_secret(data_dir: Path) -> bytes:
    """The session key material: the environment's, or the data directory's (made once)."""
    given = os.environ.get(SECRET_ENV)
    if given:
        return given.encode("utf-8")
    path = data_dir / "web-secret"
    private_folder(data_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as handle:
        value = secrets.token_hex(32).encode("ascii")
        handle.write(value)
    return value


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: their token's principal and the session's CSRF token."""

    principal: Principal
    csrf: str
    session: str = ""
    """The session's id (what logging out ends)."""

    @property
    def name(self) -> str:
        return self.principal.token_name

    @property
    def project(self) -> str:
        return self.principal.project_name

    @property
    def project_id(self) -> str:
        return self.principal.project_id

    def can(self, scope: str) -> bool:
        return self.principal.allows(scope)

    def require(self, scope: str) -> None:
        if not self.can(scope):
            raise ServiceError(f"your token lacks the '{scope}' scope", status=403)


COOKIE_VERSION = 2
"""The cookie's format: version 1 carried the token (encrypted) and opens nothing now."""


class Sessions:
    def __init__(self, service: Service) -> None:
        self.service = service
        secret = load_secret(service.settings.data_dir)
        self.fernet = Fernet(_fernet_key(secret))
        self._csrf_key = _csrf_key(secret)

    def issue(self, token_id: str) -> str:
        """A new session of the token ``token_id`` (a row of the database) and its cookie's
        value, which holds the session's id only."""
        session = self.service.tokens.open_session(token_id, SESSION_SECONDS)
        payload = json.dumps({"v": COOKIE_VERSION, "s": session}).encode("utf-8")
        return self.fernet.encrypt(payload).decode("ascii")

    def open(self, cookie: str | None) -> str | None:
        """The session id of a cookie this server issued in the last
        :data:`SESSION_SECONDS`, else None (a cookie of an older version opens nothing)."""
        if not cookie:
            return None
        try:
            data = json.loads(self.fernet.decrypt(cookie.encode("ascii"), ttl=SESSION_SECONDS))
        except (InvalidToken, ValueError, UnicodeEncodeError):
            return None
        if (not isinstance(data, dict) or data.get("v") != COOKIE_VERSION
                or not isinstance(data.get("s"), str) or not data["s"]):
            return None
        return str(data["s"])

    def csrf(self, session: str) -> str:
        """The session's CSRF token: derived from its id with the key, never stored."""
        digest = hmac.new(self._csrf_key, session.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def resolve(self, cookie: str | None) -> Viewer:
        """The viewer of a session cookie, or 401: no session, a session that was logged out
        or expired, a revoked token."""
        session = self.open(cookie)
        if session is None:
            raise ServiceError("please log in with your token", status=401)
        principal = self.service.tokens.session_principal(session)
        return Viewer(principal, self.csrf(session), session)

    def viewer(self, request: Request) -> Viewer:
        """The request's viewer, or 401 (the route class turns that into the login page)."""
        known: Viewer | None = getattr(request.state, "viewer", None)
        if known is not None:
            return known
        viewer = self.resolve(request.cookies.get(COOKIE))
        request.state.viewer = viewer
        return viewer


def check_csrf(viewer: Viewer, given: str | None) -> None:
    """Refuse a state-changing request whose CSRF token is missing or wrong (403)."""
    token = given or ""
    if not token or not hmac.compare_digest(token.encode(), viewer.csrf.encode()):
        raise ServiceError("the form's security token is missing or stale; reload the page "
                           "and try again", status=403)
