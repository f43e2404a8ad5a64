"""Batch jobs: the Batch API batches each job submitted (recorded as soon as each exists), and
the time a waiting batch job is due for its next status poll.

Revision ID: 0002_batch
Revises: 0001
Create Date: 2025-02-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002_batch'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('wake_at', sa.Float(), nullable=True))
    op.create_table('job_batches',
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('batch_id', sa.String(length=200), nullable=False),
    sa.Column('part', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('requests', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('completed', sa.Integer(), nullable=False),
    sa.Column('failed', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'batch_id')
    )


def downgrade() -> None:
    op.drop_table('job_batches')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('wake_at')
