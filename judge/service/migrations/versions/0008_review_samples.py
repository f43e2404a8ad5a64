"""A run's review samples referenced by file id (its estimate sample, and separate draws by
their n and seed), so a sample is found however many files the project holds; and whether a
label was given blind (the estimate sample's page hides the judge's and the rules' verdicts
and the gold).

Revision ID: 0008_review_samples
Revises: 0007_correction_decisions
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008_review_samples'
down_revision = '0007_correction_decisions'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'review_samples',
        sa.Column('project_id', sa.String(40), sa.ForeignKey('projects.id'), nullable=False),
        sa.Column('job_id', sa.String(40), primary_key=True),
        sa.Column('name', sa.String(60), primary_key=True),
        sa.Column('file_id', sa.String(40), sa.ForeignKey('files.id'), nullable=False),
        sa.Column('token_id', sa.String(40)),
        sa.Column('created_at', sa.Float, nullable=False),
    )
    with op.batch_alter_table('labels') as batch:
        batch.add_column(sa.Column('blind', sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table('labels') as batch:
        batch.drop_column('blind')
    op.drop_table('review_samples')
