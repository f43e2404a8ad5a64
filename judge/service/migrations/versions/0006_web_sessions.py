"""Browser sessions live in the database: logging out (or ending a session otherwise) is seen
by every replica at once, not only by the browser that dropped its cookie.

Revision ID: 0006_web_sessions
Revises: 0005_live_token_names
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006_web_sessions'
down_revision = '0005_live_token_names'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'web_sessions',
        sa.Column('id', sa.String(64), primary_key=True),
        sa.Column('token_id', sa.String(40), sa.ForeignKey('tokens.id'), nullable=False),
        sa.Column('created_at', sa.Float, nullable=False),
        sa.Column('expires_at', sa.Float, nullable=False),
        sa.Column('ended_at', sa.Float),
    )
    op.create_index('ix_web_sessions_expires', 'web_sessions', ['expires_at'])


def downgrade() -> None:
    op.drop_index('ix_web_sessions_expires', table_name='web_sessions')
    op.drop_table('web_sessions')
