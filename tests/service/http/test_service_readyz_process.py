"""``/readyz`` of a real ``dst-judge serve`` whose database is not migrated or unreachable
(issue 36): a probe without an admin token learns only "not ready" (503) and no server path,
host or user; a token with the admin scope gets the reason."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.service.conftest import fresh_postgres_database
from tests.service.serve_process import ServeProcess, get_text

pytestmark = [pytest.mark.timeout(180), pytest.mark.servers]


def _ready(server: ServeProcess, token: str | None = None) -> tuple[int, dict[str, object]]:
    status, body = get_text(server.url + "/readyz", token=token)
    return status, json.loads(body)


def test_a_schema_behind_head_is_unready_and_only_an_admin_hears_why(tmp_path: Path) -> None:
    data = tmp_path / "api"
    with ServeProcess(data, args=["--no-worker"], max_seconds=120) as server:
        admin = server.admin_token()
        assert _ready(server) == (200, {"status": "ready", "reason": None})
        with sqlite3.connect(data / "dst-judge.db") as conn:  # as an older version left it
            conn.execute("UPDATE alembic_version SET version_num = '0001'")
        status, plain = _ready(server)
        _, detailed = _ready(server, admin)
    assert status == 503 and plain == {"status": "unavailable", "reason": None}
    assert "revision 0001" in str(detailed["reason"]), detailed


def test_an_unreachable_database_names_no_path_or_host_to_a_plain_probe(
        tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    with fresh_postgres_database(postgres_url) as url, \
            ServeProcess(tmp_path / "api", db=url, args=["--no-worker"],
                         max_seconds=120) as server:
        admin = server.admin_token()
        assert _ready(server)[0] == 200
        name = url.partition("?")[0].rsplit("/", 1)[1]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        deadline = time.monotonic() + 30
        while (answer := get_text(server.url + "/readyz"))[0] != 503:
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        status, body = answer
        _, detailed = get_text(server.url + "/readyz", token=admin)
    assert status == 503 and json.loads(body) == {"status": "unavailable", "reason": None}
    # what the reason would have said: the database's name and where the server listens
    host = url.partition("host=")[2].partition("&")[0] or "127.0.0.1"
    for secret in (name, host, str(tmp_path), "postgres"):
        assert secret not in body, (secret, body)
    # the admin's token no longer resolves (its database is gone): the short answer too
    assert json.loads(detailed)["reason"] is None
