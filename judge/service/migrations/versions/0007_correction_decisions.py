"""Reviewers' decisions on label-error candidates (accept the suggested value, another value,
or "the annotation is right"), and adjudicators' decisions where reviewers disagree: what the
web's candidates queue stores and exports as a corrections file.

Revision ID: 0007_correction_decisions
Revises: 0006_web_sessions
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007_correction_decisions'
down_revision = '0006_web_sessions'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'correction_decisions',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('project_id', sa.String(40), sa.ForeignKey('projects.id'), nullable=False),
        sa.Column('job_id', sa.String(40), nullable=False),
        sa.Column('candidate', sa.String(600), nullable=False),
        sa.Column('dialogue_id', sa.String(300), nullable=False),
        sa.Column('turn_index', sa.Integer, nullable=False),
        sa.Column('slot', sa.String(200), nullable=False),
        sa.Column('gold', sa.String(50), nullable=False),
        sa.Column('action', sa.String(10), nullable=False),
        sa.Column('value', sa.Text),
        sa.Column('was', sa.Text),
        sa.Column('adjudicated', sa.Boolean, nullable=False),
        sa.Column('reviewer', sa.String(200), nullable=False),
        sa.Column('token_id', sa.String(40)),
        sa.Column('note', sa.Text),
        sa.Column('created_at', sa.Float, nullable=False),
        sa.Column('updated_at', sa.Float, nullable=False),
        sa.UniqueConstraint('project_id', 'job_id', 'candidate', 'reviewer', 'adjudicated',
                            name='uq_correction_decisions'),
    )


def downgrade() -> None:
    op.drop_table('correction_decisions')
