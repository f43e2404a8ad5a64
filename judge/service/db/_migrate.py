"""Run the packaged alembic migrations on start. On Postgres an advisory lock makes replicas
that start together migrate one after the other (the later ones find nothing to do)."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).parent.parent / "migrations"  # judge/service/migrations
_LOCK_KEY = 0x64_73_74_6A  # "dstj": the advisory lock id of schema upgrades


class Migratable(Protocol):
    """What migrating needs of a database (``_db.Database`` has it; this module does not
    import that one, which calls it)."""

    engine: sa.Engine
    is_sqlite: bool


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(db: Migratable) -> str | None:
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(db: Migratable, writer: AbstractContextManager[Any] | None = None) -> None:
    """Bring the schema to the newest revision (no-op when it is there already); ``writer``
    is the SQLite database's write lock, held meanwhile."""
    config = alembic_config()
    if db.is_sqlite:
        with writer or contextlib.nullcontext(), db.engine.connect() as connection:
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
