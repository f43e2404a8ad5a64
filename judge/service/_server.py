"""Run the app under uvicorn, with a SIGTERM that drains the worker at once: no new claims,
no new model requests; calls in flight get the grace period, then their jobs go back to the
queue. uvicorn meanwhile stops accepting connections and finishes open requests."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

import uvicorn

from ._app import create_app
from ._settings import ServiceSettings


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: Any) -> None:
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.service.drain()
        super().handle_exit(sig, frame)


def run_server(settings: ServiceSettings, *, host: str = "127.0.0.1", port: int = 8765,
               log_level: str = "info", access_log: bool = True,
               max_seconds: float | None = None, app: Any = None) -> None:
    """Serve until SIGINT or SIGTERM (or a SIGTERM of its own after ``max_seconds``).
    ``app`` is an app from :func:`create_app` that a caller extended (the web interface)."""
    if max_seconds is not None:
        timer = threading.Timer(max_seconds, os.kill, (os.getpid(), signal.SIGTERM))
        timer.daemon = True
        timer.start()
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = app if app is not None else create_app(settings)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            access_log=access_log, timeout_graceful_shutdown=5,
                            lifespan="on", proxy_headers=True)
    _Server(config, app.state.service).run()
