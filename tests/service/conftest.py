"""Fixtures of the service tests: the app in-process over httpx's ASGI transport, a fake model
server on 127.0.0.1, tokens, uploads, and a real Postgres from pgserver when it can start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs the serve extra")

import sqlalchemy as sa

from judge.service import Database, Service, build_settings, create_app, create_token
from tests.conftest import EXAMPLES
from tests.fault_server import FaultServer
from tests.service.serve_process import running_postgres

CANARY_KEY = "sk-canary-0123456789abcdef"
FINAL = ("succeeded", "failed", "cancelled", "stopped")


class Api:
    """A synchronous face on ``httpx.AsyncClient(transport=ASGITransport(app))``: the app runs
    in this process, in an event loop of its own thread."""

    def __init__(self, app: Any, token: str | None = None) -> None:
        self.app = app
        self.token = token
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                        base_url="http://testserver")

    def request(self, method: str, url: str, *, token: str | None = None,
                **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        chosen = token if token is not None else self.token
        if chosen:
            headers.setdefault("Authorization", f"Bearer {chosen}")
        future = asyncio.run_coroutine_threadsafe(
            self.client.request(method, url, headers=headers, **kwargs), self.loop)
        return future.result(60)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)

    def upload(self, path: Path | str, kind: str, *, token: str | None = None,
               name: str | None = None, content: bytes | None = None) -> httpx.Response:
        path = Path(path)
        data = content if content is not None else path.read_bytes()
        return self.post("/v1/files", token=token, data={"kind": kind},
                         files={"file": (name or path.name, data)})

    def upload_examples(self, predictions: str = "predictions.jsonl") -> dict[str, str]:
        """The project's examples uploaded: ``{"schema": id, "dialogues": id,
        "predictions": id}`` (``predictions``: another file of examples/)."""
        return {kind: self.upload(EXAMPLES / name, kind).json()["id"] for kind, name in
                (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                 ("predictions", predictions))}

    def wait(self, job_id: str, timeout: float = 30.0, **kw: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(f"/v1/jobs/{job_id}", **kw).json()
            if job["status"] in FINAL:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s")
            time.sleep(0.05)

    def evaluated(self, files: dict[str, str], model: str = "fake-model") -> str:
        """The id of a succeeded evaluate job over ``files`` (the fake model answers)."""
        response = self.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                               "options": {"model": model}})
        assert response.status_code == 201, response.text
        done = self.wait(response.json()["id"])
        assert done["status"] == "succeeded", done
        return str(done["id"])

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def service_settings(data_dir: Path, model_url: str, **values: Any) -> Any:
    base = {"data_dir": data_dir, "poll_seconds": 0.05, "lease_seconds": 5.0,
            "endpoints": {"fake": {"base_url": model_url, "api_key": CANARY_KEY},
                          "other": {"base_url": model_url, "api_key": CANARY_KEY,
                                    "models": ["allowed-model"]}},
            "default_endpoint": "fake"}
    base.update(values)
    return build_settings(base)


@contextlib.contextmanager
def running_service(settings: Any, *, web: bool = False) -> Iterator[tuple[Service, Any]]:
    """The app of ``settings`` with its service started (and the web interface mounted when
    ``web``); stopped afterwards. The one way the in-process tests run the service."""
    app = create_app(settings)
    if web:
        from judge.web import mount_web

        mount_web(app)
    service: Service = app.state.service
    service.start()
    try:
        yield service, app
    finally:
        service.stop()


@pytest.fixture
def service_env(tmp_path: Path, fake_model: FaultServer) -> Iterator[dict[str, Any]]:
    """A started service (SQLite) with a project 'lab' (submit, admin, read, review tokens)
    and a project 'other' (submit token), and the example files uploaded to 'lab'."""
    settings = service_settings(tmp_path / "data", fake_model.url)
    with running_service(settings) as (service, app):
        tokens = {
            "submit": create_token(service.db, "lab", "read,submit", name="alice")[0],
            "read": create_token(service.db, "lab", "read", name="reader")[0],
            "review": create_token(service.db, "lab", "review", name="bob")[0],
            "admin": create_token(service.db, "lab", "admin", name="root")[0],
            "other": create_token(service.db, "other", "read,submit", name="eve")[0],
        }
        api = Api(app, tokens["submit"])
        try:
            files = api.upload_examples()
            yield {"api": api, "service": service, "tokens": tokens, "files": files,
                   "model": fake_model, "settings": settings}
        finally:
            api.close()


# --- Postgres --------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated SQLite service database of this test."""
    database = Database(f"sqlite:///{tmp_path / 'service.db'}")
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture(scope="module")
def module_database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite service database migrated once for a whole test module (migrating is the slow
    part); a module's ``db`` fixture opens it per test."""
    url = f"sqlite:///{tmp_path_factory.mktemp('module-db') / 'service.db'}"
    database = Database(url)
    database.migrate()
    database.dispose()
    return url


def insert_job(db: Database, job_id: str, project_id: str, token_id: str, status: str,
               **values: Any) -> None:
    """A job row as a finished worker leaves it, written directly (no queue, no model)."""
    from judge.service.db._db import jobs

    row = {"kind": "evaluate", "mode": "live", "inputs": {}, "options": {}, "created_at": 1.0,
           "updated_at": 1.0, "attempts": 1, "cancel_requested": False, "cost_usd": 0.0,
           "tokens_used": 0, "imported": False, **values}
    with db.write() as conn:
        conn.execute(jobs.insert().values(id=job_id, project_id=project_id, token_id=token_id,
                                          status=status, **row))


def queue_database(path: Path) -> Database:
    """A migrated SQLite service database at ``path`` with one project, ``prj_x``."""
    database = Database(f"sqlite:///{path}")
    database.migrate()
    with database.write() as conn:
        conn.execute(sa.text("INSERT INTO projects (id, name, created_at, settings) "
                             "VALUES ('prj_x', 'x', 0, '{}')"))
    return database


def count_rows(db: Database, table: sa.Table) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar())


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real Postgres (pgserver: binaries from PyPI) in a temporary directory."""
    pytest.importorskip("pgserver", reason="pgserver (test extra) is not installed")
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(running_postgres())
        except Exception as exc:  # no binaries for this platform, no shared memory, ...
            pytest.skip(f"Postgres (pgserver) cannot start here: {exc}")
        yield url


@contextlib.contextmanager
def fresh_postgres_database(postgres_url: str) -> Iterator[str]:
    """A new database on the session's Postgres server, dropped afterwards."""
    import psycopg

    name = f"t{os.getpid()}_{time.monotonic_ns() % 10**12}"
    admin = postgres_url.replace("postgresql://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, query = postgres_url.partition("?")
    url = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[str]:
    """A fresh database on the session's Postgres server for one test."""
    with fresh_postgres_database(postgres_url) as url:
        yield url


@pytest.fixture(scope="module")
def postgres_module_db(postgres_url: str) -> Iterator[str]:
    """One database on the session's Postgres server for a whole test module."""
    with fresh_postgres_database(postgres_url) as url:
        yield url
