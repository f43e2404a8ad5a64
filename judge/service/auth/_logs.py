"""No log line carries a secret: a filter on the server's log handlers that blanks the values
of credential-like query parameters (``?access_token=``, ``?api_key=``...) in any URL a line
holds, and anything shaped like one of our tokens (``dsj_...``) or an OpenAI-style key
(``sk-...``) wherever it starts, whichever logger wrote it (uvicorn's access log writes the
request line as the client sent it, query string included). Lines are searched with their
percent-escapes decoded, so an escaped name or token is found too, and blanked as written."""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "[redacted]"

SECRET_PARAMS = ("access_token", "token", "api_key", "apikey", "api-key", "key", "secret",
                 "client_secret", "password", "passwd", "auth", "authorization", "session",
                 "dsj_session", "csrf", "signature", "sig", "code", "refresh_token",
                 "id_token", "credential", "credentials")
"""Query parameters whose values are credentials (compared case-insensitively; a name that
ends in one of these after ``_`` or ``-``, such as ``x_api_key``, counts too)."""

_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;](?:[^=&;\s\"'#]*[_-])?(?:" + "|".join(re.escape(p) for p in SECRET_PARAMS)
    + r")=)(?P<value>[^&;\s\"'#]*)", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(r"(?P<prefix>dsj_|sk-)(?P<value>[A-Za-z0-9_\-]{8,})")
"""Our tokens and OpenAI-style keys wherever they start: no word boundary is asked for, so a
token glued to other letters (``?q=xdsj_...``) is found too."""
_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\][\w.\-/\\]+")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_ROUNDS = 4
"""Rounds of percent-decoding (``%255F`` is ``%5F`` once decoded, ``_`` twice)."""


def _decoded(text: str) -> tuple[str, list[int]]:
    """``text`` with its percent-escapes decoded (each escape one character, its byte), in up
    to :data:`_ROUNDS` rounds, and where each character of the result starts in ``text``
    (one entry more, for the end): a match in the decoded text maps back to what to blank."""
    starts = list(range(len(text) + 1))
    for _ in range(_ROUNDS):
        if "%" not in text:
            break
        pieces: list[str] = []
        mapped: list[int] = []
        at = 0
        for escape in _ESCAPE.finditer(text):
            pieces.append(text[at:escape.start()])
            mapped.extend(starts[at:escape.start()])
            pieces.append(chr(int(escape.group(1), 16)))
            mapped.append(starts[escape.start()])
            at = escape.end()
        if at == 0:
            break
        pieces.append(text[at:])
        mapped.extend(starts[at:])  # includes the end
        text, starts = "".join(pieces), mapped
    return text, starts


def redact(text: str) -> str:
    """``text`` with every credential-like query value and token-shaped word blanked, found
    in the text as decoded (``?access%5Ftoken=dsj%5F...`` is ``?access_token=dsj_...``) and
    blanked in the text as written."""
    decoded, starts = _decoded(text)
    spans = [(starts[m.start("value")], starts[m.end("value")])
             for pattern in (_QUERY_SECRET, _TOKEN_SHAPES) for m in pattern.finditer(decoded)]
    if not spans:
        return text
    pieces, at = [], 0
    for start, end in sorted(spans):
        if start >= at:
            pieces.append(text[at:start] + REDACTED)
        at = max(at, end)
    return "".join(pieces) + text[at:]


class RedactSecrets(logging.Filter):
    """A handler filter: the record's message, arguments and traceback redacted before
    formatting (an exception's message can quote a key as well as a log call can)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:  # formatters reuse a set exc_text
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _redacted(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class OneLineConnectionErrors(logging.Filter):
    """A filter of the ``asyncio`` logger: a connection that failed in the event loop (its
    "Fatal error ..." record, with the protocol's and the transport's reprs and a traceback
    through the installation's files) becomes one line naming the exception, without a path.
    Any client can cause one (a malformed request), so a traceback each would let anyone fill
    the log; the connection is closed either way."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if not message.startswith("Fatal "):
            return True
        error = record.exc_info[1] if record.exc_info else None
        what = message.partition("\n")[0].rstrip(".")
        if error is not None:
            said = _PATH.sub("<path>", str(error).partition("\n")[0][:200])
            what += f" ({type(error).__name__}: {said})" if said else f" ({type(error).__name__})"
        record.msg, record.args = "a connection was closed: %s", (what,)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def log_to_stderr(level: str = "info") -> None:
    """A process's logging as ``dst-judge serve`` and ``dst-judge worker`` set it up (each of
    their processes, worker processes included): lines to stderr at ``level``, secrets
    blanked, a failed connection one line."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact_logs()
    loop_log = logging.getLogger("asyncio")
    if not any(isinstance(f, OneLineConnectionErrors) for f in loop_log.filters):
        loop_log.addFilter(OneLineConnectionErrors())


def redact_logs(*names: str) -> None:
    """Put :class:`RedactSecrets` on every handler of the root logger and of ``names`` (and
    on those loggers themselves, for handlers added later); once each."""
    for name in ("", *names):
        logger = logging.getLogger(name)
        for target in (logger, *logger.handlers):
            if not any(isinstance(f, RedactSecrets) for f in target.filters):
                target.addFilter(RedactSecrets())
