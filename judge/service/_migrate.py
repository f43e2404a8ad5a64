"""Run the packaged alembic migrations on start. On Postgres an advisory lock makes replicas
that start together migrate one after the other (the later ones find nothing to do)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

if TYPE_CHECKING:
    from ._db import Database

MIGRATIONS = Path(__file__).with_name("migrations")
_LOCK_KEY = 0x64_73_74_6A  # "dstj": the advisory lock id of schema upgrades


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(db: Database) -> str | None:
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision (no-op when it is there already)."""
    config = alembic_config()
    if db.is_sqlite:
        with db._writer or contextlib.nullcontext(), db.engine.connect() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
        return
    with db.engine.connect() as connection:
        connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
        connection.commit()
        try:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
        finally:
            connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _LOCK_KEY})
            connection.commit()



def copy_database(source: Database, target: Database, *, batch: int = 500) -> dict[str, int]:
    """Copy every row of a service database into another (SQLite → Postgres): both are
    migrated first, the target must be empty. Returns rows copied per table."""
    from ._db import metadata, projects

    source.migrate()
    target.migrate()
    with target.read() as conn:
        if conn.execute(sa.select(sa.func.count()).select_from(projects)).scalar():
            from .._errors import OptionError

            raise OptionError("the target database already holds projects; copy into an "
                              "empty one")
    copied: dict[str, int] = {}
    for table in metadata.sorted_tables:
        count = 0
        with source.read() as reading:
            result = reading.execute(sa.select(table))
            while rows := result.fetchmany(batch):
                with target.write() as writing:
                    writing.execute(table.insert(), [dict(r._mapping) for r in rows])
                count += len(rows)
        copied[table.name] = count
    if target.is_postgres:
        with target.write() as conn:
            for table in metadata.sorted_tables:
                column = table.c.get("id")
                if column is not None and isinstance(column.type, sa.Integer):
                    conn.execute(sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"))
    return copied
