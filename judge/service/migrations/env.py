"""Alembic environment of the service database: run in-process by ``judge.service`` on start
(with the connection it passes), or by the ``alembic`` command with ``-x url=...``."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from judge.service.db import metadata

config = context.config
target_metadata = metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url")
    if not url:
        raise RuntimeError("no database to migrate: pass -x url=URL or set sqlalchemy.url")
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        _run(connection)
        connection.commit()


def _run(connection: sa.Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
