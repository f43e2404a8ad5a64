"""The ledger of paid model requests in the database (``ledger_requests``, and the replies a
refresh replaced in ``ledger_replaced``), shared by every replica and job of a scope.

Revision ID: 0004_ledger
Revises: 0003
Create Date: 2025-02-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004_ledger'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'ledger_requests',
        sa.Column('scope', sa.String(length=40), nullable=False),
        sa.Column('key', sa.String(length=128), nullable=False),
        sa.Column('state', sa.String(length=10), nullable=False),
        sa.Column('owner', sa.String(length=300), nullable=True),
        sa.Column('lease_until', sa.Float(), nullable=True),
        sa.Column('sends', sa.Integer(), nullable=False),
        sa.Column('status', sa.Integer(), nullable=True),
        sa.Column('content', sa.LargeBinary(), nullable=True),
        sa.Column('origin', sa.String(length=100), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.Float(), nullable=False),
        sa.Column('updated_at', sa.Float(), nullable=False),
        sa.CheckConstraint("state IN ('pending', 'replied', 'failed')",
                           name='ck_ledger_requests_state'),
        sa.PrimaryKeyConstraint('scope', 'key'),
    )
    with op.batch_alter_table('ledger_requests', schema=None) as batch_op:
        batch_op.create_index('ix_ledger_requests_owner', ['owner'], unique=False)
    op.create_table(
        'ledger_replaced',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('scope', sa.String(length=40), nullable=False),
        sa.Column('key', sa.String(length=128), nullable=False),
        sa.Column('content', sa.LargeBinary(), nullable=False),
        sa.Column('status', sa.Integer(), nullable=True),
        sa.Column('origin', sa.String(length=100), nullable=True),
        sa.Column('recorded_at', sa.Float(), nullable=False),
        sa.Column('replaced_at', sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('ledger_replaced', schema=None) as batch_op:
        batch_op.create_index('ix_ledger_replaced_key', ['scope', 'key'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ledger_replaced', schema=None) as batch_op:
        batch_op.drop_index('ix_ledger_replaced_key')
    op.drop_table('ledger_replaced')
    with op.batch_alter_table('ledger_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_ledger_requests_owner')
    op.drop_table('ledger_requests')
