"""Run the app under uvicorn, with a SIGTERM that drains the worker within 0.1 s: no new claims,
no new model requests; calls in flight get the grace period, then their jobs go back to the
queue. uvicorn meanwhile stops accepting connections and finishes open requests."""

from __future__ import annotations

import errno
import os
import signal
import socket
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..._errors import OptionError
from ..auth import log_to_stderr, redact_logs
from ..db import ServiceSettings
from ._app import create_app
from ._guard import ReceivedBytes


class _HeaderTimeout(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on request headers: a connection that has
    not sent a whole request head ``header_timeout`` seconds after it opened (or after its
    last response) is closed, so slow clients cannot hold connections open for ever.

    A connection answered before its request body was read (a refusal before the body, a
    form with too many fields) ends with that answer: the rest of the body is read and thrown
    away for at most ``linger_seconds`` and ``linger_bytes`` (so the client reads the answer
    rather than a reset), and nothing after it is parsed as HTTP. Without this, the body's
    remainder was parsed as the next request, and a malformed chunk there made uvicorn try a
    second answer on the answered request, which h11 refuses with a traceback in the log."""

    header_timeout = 10.0
    linger_seconds = 2.0
    linger_bytes = 1 << 20
    _discarding = False
    _discarded = 0

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self._end_unread()
        else:
            self._arm()

    def data_received(self, data: bytes) -> None:
        ReceivedBytes.add(len(data))
        if self._discarding:
            self._discarded += len(data)
            if self._discarded > self.linger_bytes:
                self.transport.close()
            return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            super().send_400_response(msg)
        else:  # this request was answered (or is being): a second answer is not HTTP
            self.transport.close()

    def _end_unread(self) -> None:
        """The answer went out before the body was read: no next request on this
        connection. Our side ends after the answer; the client's rest is discarded."""
        self._discarding = True
        self._unset_keepalive_if_required()
        if self.transport.can_write_eof():
            self.transport.write_eof()  # after the answer's bytes still buffered
        self.loop.call_later(self.linger_seconds, self._close)

    def _close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self) -> None:
        waiting_since = self.cycle
        self.loop.call_later(self.header_timeout, self._expire, waiting_since)

    def _expire(self, waiting_since: Any) -> None:
        if self.cycle is waiting_since and not self.transport.is_closing():
            self.transport.close()  # no new request head arrived in time


class _Server(uvicorn.Server):
    """Drains the worker at the first tick after SIGTERM (within 0.1 s), in the event loop:
    never inside the signal handler, where a second signal would interrupt the drain and wait
    on a lock the interrupted frame holds (``Event.set()``), for ever."""

    def __init__(self, config: uvicorn.Config, service: Any) -> None:
        super().__init__(config)
        self.service = service
        self._drained = False

    async def on_tick(self, counter: int) -> bool:
        if self.should_exit and not self._drained:  # uvicorn's handler only sets the flag
            self._drained = True
            self.service.drain()
        return await super().on_tick(counter)


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening before anything is announced: a port in use
    (or an address this machine does not have) is a clear :class:`OptionError` (exit 2), not
    an address printed, a "startup complete" logged and then a failure."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise OptionError(f"--host {host}: not an address of this machine ({exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not a LISTENing one
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = ("the port is in use (another server listens there): stop it or choose "
               "another --port") if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise OptionError(f"cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


def run_server(settings: ServiceSettings, *, host: str = "127.0.0.1", port: int = 8765,
               log_level: str = "info", access_log: bool = True,
               max_seconds: float | None = None, app: Any = None,
               sock: socket.socket | None = None) -> None:
    """Serve until SIGINT or SIGTERM (or a SIGTERM of its own after ``max_seconds``).
    ``app`` is an app from :func:`create_app` that a caller extended (the web interface);
    ``sock`` a socket from :func:`listening_socket` (else one is bound here, before the
    app starts)."""
    sock = sock if sock is not None else listening_socket(host, port)
    if max_seconds is not None:
        timer = threading.Timer(max_seconds, os.kill, (os.getpid(), signal.SIGTERM))
        timer.daemon = True
        timer.start()
    log_to_stderr(log_level)
    app = app if app is not None else create_app(settings)
    protocol = type("HeaderTimeout", (_HeaderTimeout,),
                    {"header_timeout": settings.header_timeout_seconds})
    trusted = settings.trusted_proxies
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            access_log=access_log, timeout_graceful_shutdown=5,
                            lifespan="on", http=protocol, proxy_headers=bool(trusted),
                            forwarded_allow_ips=",".join(trusted) or None)
    redact_logs("uvicorn", "uvicorn.error", "uvicorn.access")  # after uvicorn's own set-up
    _Server(config, app.state.service).run(sockets=[sock])
