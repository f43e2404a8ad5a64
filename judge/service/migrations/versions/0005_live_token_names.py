"""A reviewer is a person, not a secret: the names of a project's live tokens are unique.

Labels and usage are keyed by the token's name, so a second live token of the same name would
act as the same reviewer. A unique index over (project, name) of the tokens not revoked
(partial: revoked tokens keep their names, so a rotated or replaced token frees its name) on
SQLite and Postgres alike. Live duplicates already in the database keep the oldest token's
name; each later one is renamed ``<name>#<token id>`` (its holder still works, under a name of
its own).

Revision ID: 0005_live_token_names
Revises: 0004_ledger
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005_live_token_names'
down_revision = '0004_ledger'
branch_labels = None
depends_on = None

_tokens = sa.table("tokens", sa.column("id", sa.String), sa.column("project_id", sa.String),
                   sa.column("name", sa.String), sa.column("created_at", sa.Float),
                   sa.column("revoked_at", sa.Float))
_LIVE = sa.text("revoked_at IS NULL")


def upgrade() -> None:
    conn = op.get_bind()
    seen: set[tuple[str, str]] = set()
    rows = conn.execute(sa.select(_tokens.c.id, _tokens.c.project_id, _tokens.c.name)
                        .where(_tokens.c.revoked_at.is_(None))
                        .order_by(_tokens.c.created_at, _tokens.c.id)).all()
    for row in rows:
        key = (row.project_id, row.name)
        if key in seen:
            conn.execute(_tokens.update().where(_tokens.c.id == row.id)
                         .values(name=f"{row.name[:150]}#{row.id}"))
        seen.add(key)
    op.create_index('uq_tokens_live_name', 'tokens', ['project_id', 'name'], unique=True,
                    sqlite_where=_LIVE, postgresql_where=_LIVE)


def downgrade() -> None:
    op.drop_index('uq_tokens_live_name', table_name='tokens')
