"""Who is behind a page: the session cookie's contents and the viewer it resolves to.

The cookie holds the token and a CSRF secret, encrypted and authenticated with Fernet
(AES-CBC + HMAC, with its issue time), so a copied cookie expires after
:data:`SESSION_SECONDS` and never shows the token. The cookie also names its session, a row of
the database: every request resolves the token and the session there, so a revoked token or a
logged-out session is refused at once, by every replica.

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


class Sessions:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.fernet = Fernet(_fernet_key(load_secret(service.settings.data_dir)))

    def issue(self, token: str, token_id: str) -> str:
        """A new session of ``token`` (a row of the database) and its cookie's value."""
        session = self.service.tokens.open_session(token_id, SESSION_SECONDS)
        payload = json.dumps({"t": token, "c": secrets.token_urlsafe(24),
                              "s": session}).encode("utf-8")
        return self.fernet.encrypt(payload).decode("ascii")

    def open(self, cookie: str | None) -> tuple[str, str, str] | None:
        """(token, CSRF token, session id) of a cookie this server issued in the last
        :data:`SESSION_SECONDS`, else None (a cookie of an older version has no session id
        and opens nothing)."""
        if not cookie:
            return None
        try:
            data = json.loads(self.fernet.decrypt(cookie.encode("ascii"), ttl=SESSION_SECONDS))
        except (InvalidToken, ValueError, UnicodeEncodeError):
            return None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str)
                                                 for k in ("t", "c", "s")):
            return None
        return data["t"], data["c"], data["s"]

    def resolve(self, cookie: str | None) -> Viewer:
        """The viewer of a session cookie, or 401: no session, a revoked token, a session
        that was logged out or expired."""
        opened = self.open(cookie)
        if opened is None:
            raise ServiceError("please log in with your token", status=401)
        token, csrf, session = opened
        try:
            principal = self.service.tokens.resolve_token(token)
        except ServiceError:
            raise ServiceError("your token was revoked; log in with another", status=401) \
                from None
        if not self.service.tokens.session_alive(session, principal.token_id):
            raise ServiceError("please log in with your token", status=401)
        return Viewer(principal, csrf, session)

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
