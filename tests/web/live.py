"""A real ``dst-judge serve`` app under uvicorn in a background thread, on 127.0.0.1 and an
ephemeral port, for the browser tests and the browser benchmarks (Chromium needs a real
HTTP server; the app, its worker and the fake model all run in this process)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from judge.service import build_settings, create_app, create_token
from judge.web import mount_web

CANARY_KEY = "sk-canary-0123456789abcdef"


class LiveServer:
    def __init__(self, data_dir: Path, model_url: str, **settings: Any) -> None:
        values = {"data_dir": data_dir, "poll_seconds": 0.05, "lease_seconds": 5.0,
                  "endpoints": {"fake": {"base_url": model_url, "api_key": CANARY_KEY,
                                         "models": ["fake-judge"],
                                         "default_model": "fake-judge"}},
                  "default_endpoint": "fake", **settings}
        self.app = create_app(build_settings(values))
        mount_web(self.app)
        self.service = self.app.state.service
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning",
                                access_log=False, lifespan="on", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="live-serve")
        self.url = ""

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the live server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(15)

    def token(self, name: str, scopes: str, project: str = "lab") -> str:
        return create_token(self.service.db, project, scopes, name=name)[0]

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"},
                            timeout=60, trust_env=False)

    def import_bundle(self, token: str, data: bytes) -> str:
        with self.api(token) as client:
            response = client.post("/v1/bundles", files={"file": ("run.tar.gz", data)})
        response.raise_for_status()
        return str(response.json()["id"])
