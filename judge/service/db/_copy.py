"""Copying a whole service database into another (``dst-judge serve copy-db``: SQLite to
Postgres), table by table in the tables' dependency order."""

from __future__ import annotations

import sqlalchemy as sa

from ..._errors import OptionError
from ._db import Database, metadata, projects


def copy_database(source: Database, target: Database, *, batch: int = 500) -> dict[str, int]:
    """Copy every row of a service database into another (SQLite → Postgres): both are
    migrated first, the target must be empty. Returns rows copied per table."""
    source.migrate()
    target.migrate()
    with target.read() as conn:
        if conn.execute(sa.select(sa.func.count()).select_from(projects)).scalar():
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
