"""The service's public surfaces as the guarantee tests see them: the route table of the
FastAPI app (read at run time, so a route added tomorrow is tested tomorrow), URLs filled from
a route's path parameters, and the whole database as plain rows (what a refused request must
leave exactly as it was).

Nothing here names a private function of ``judge.service`` or ``judge.web``: the routes come
from ``app.routes``, the rows from the database file through SQLAlchemy's reflection."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PARAM = re.compile(r"{([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z_]+))?}")


@dataclass(frozen=True)
class RouteInfo:
    path: str
    """The full path template, e.g. ``/ui/runs/{job_id}/turns/{dialogue_id:path}/{turn_index}``."""
    methods: frozenset[str]
    query: tuple[str, ...] = ()
    """The query parameters the route declares (FastAPI's ``dependant``)."""

    @property
    def params(self) -> list[str]:
        return [name for name, _ in _PARAM.findall(self.path)]

    def url(self, values: dict[str, Any]) -> str:
        """The path with each parameter replaced by its value (URL-quoted; a ``:path``
        parameter keeps its slashes quoted too, as the pages link it)."""
        missing = [p for p in self.params if p not in values]
        if missing:
            raise KeyError(f"route {self.path} takes {missing}, which the test has no value "
                           "for: say what such a parameter names")
        return _PARAM.sub(lambda m: quote(str(values[m.group(1)]), safe=""), self.path)


def routes(app: Any) -> list[RouteInfo]:
    """Every HTTP route of ``app`` with its full path, through included routers (FastAPI
    0.16x keeps an included router as one entry that carries its prefix) and without
    mounted sub-applications (static files)."""
    found: list[RouteInfo] = []
    _walk(getattr(app, "routes", []), "", found)
    return found


def _walk(entries: Any, prefix: str, found: list[RouteInfo]) -> None:
    for entry in entries:
        context = getattr(entry, "include_context", None)
        if context is not None:  # a lazily included router: its routes under its prefix
            _walk(context.included_router.routes, prefix + (context.prefix or ""), found)
            continue
        methods = getattr(entry, "methods", None)
        path = getattr(entry, "path", None)
        if methods is None or path is None:  # a Mount (static files) or a websocket
            continue
        dependant = getattr(entry, "dependant", None)
        query = tuple(q.name for q in getattr(dependant, "query_params", ()))
        found.append(RouteInfo(prefix + path, frozenset(m.upper() for m in methods), query))


VOLATILE_TABLES = frozenset({"workers", "alembic_version", "rate_events", "rate_pools",
                             "rate_waiters"})
"""Rows that change with time or traffic, not with what a request asked for."""
VOLATILE_COLUMNS = frozenset({"last_used_at", "heartbeat_at"})
"""A token's last use moves on every authenticated request, refused or not."""


def database_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (sorted, volatile columns left out): two calls compare
    equal when nothing a client could ask for has changed in between."""
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        state: dict[str, list[tuple[Any, ...]]] = {}
        with engine.connect() as conn:
            for name, table in sorted(meta.tables.items()):
                if name in VOLATILE_TABLES:
                    continue
                columns = [c for c in table.c if c.name not in VOLATILE_COLUMNS]
                rows = conn.execute(sa.select(*columns)).all()
                state[name] = sorted(tuple(repr(v) for v in row) for row in rows)
        return state
    finally:
        engine.dispose()


def changed_tables(before: dict[str, list[tuple[Any, ...]]],
                   after: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    return sorted(name for name in set(before) | set(after)
                  if before.get(name) != after.get(name))


def web_login(client: Any, token: str) -> str:
    """Log in through the interface's form with ``client`` (anything with ``get`` and
    ``post`` that keeps cookies); returns the session's CSRF token from the page."""
    page = client.get("/ui/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert nonce, f"no CSRF field on the login page: {page.status_code} {page.text[:300]}"
    done = client.post("/ui/login", data={"token": token, "csrf": nonce.group(1),
                                          "next": "/ui/"})
    assert done.status_code == 303, (done.status_code, done.text[:500])
    home = client.get("/ui/")
    csrf = re.search(r'<meta name="csrf-token" content="([^"]*)">', home.text)
    assert csrf and csrf.group(1), f"no CSRF token on the home page: {home.text[:300]}"
    return csrf.group(1)
