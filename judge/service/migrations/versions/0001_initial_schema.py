"""Initial schema: projects, tokens, blobs and files, jobs with leases and run logs,
judgments, artifacts, labels, the shared rate-limit pool, workers, settings.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blobs',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('sha256')
    )
    op.create_table('projects',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('settings', JSON, nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('rate_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('endpoint', sa.String(length=100), nullable=False),
    sa.Column('at', sa.Float(), nullable=False),
    sa.Column('done_at', sa.Float(), nullable=True),
    sa.Column('tokens', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('rate_events', schema=None) as batch_op:
        batch_op.create_index('ix_rate_events', ['endpoint', 'at'], unique=False)

    op.create_table('rate_pools',
    sa.Column('endpoint', sa.String(length=100), nullable=False),
    sa.Column('paused_until', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('endpoint')
    )
    op.create_table('rate_waiters',
    sa.Column('endpoint', sa.String(length=100), nullable=False),
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('until', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('endpoint', 'job_id')
    )
    op.create_table('service_settings',
    sa.Column('key', sa.String(length=100), nullable=False),
    sa.Column('value', JSON, nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('workers',
    sa.Column('id', sa.String(length=80), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.Float(), nullable=False),
    sa.Column('heartbeat_at', sa.Float(), nullable=False),
    sa.Column('draining', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('files',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('info', JSON, nullable=False),
    sa.Column('token_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ),
    sa.ForeignKeyConstraint(['sha256'], ['blobs.sha256'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'kind', 'sha256', name='uq_files_content')
    )
    op.create_table('jobs',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('token_id', sa.String(length=40), nullable=True),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('mode', sa.String(length=10), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('endpoint', sa.String(length=100), nullable=True),
    sa.Column('inputs', JSON, nullable=False),
    sa.Column('options', JSON, nullable=False),
    sa.Column('budget_usd', sa.Float(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('started_at', sa.Float(), nullable=True),
    sa.Column('finished_at', sa.Float(), nullable=True),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.Column('lease_owner', sa.String(length=80), nullable=True),
    sa.Column('lease_expires', sa.Float(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('progress', JSON, nullable=True),
    sa.Column('manifest', JSON, nullable=True),
    sa.Column('summary', JSON, nullable=True),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('tokens_used', sa.BigInteger(), nullable=False),
    sa.Column('imported', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_project', ['project_id', 'created_at'], unique=False)
        batch_op.create_index('ix_jobs_queue', ['status', 'created_at'], unique=False)

    op.create_table('labels',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('job_id', sa.String(length=40), nullable=True),
    sa.Column('dialogue_id', sa.String(length=300), nullable=False),
    sa.Column('turn_index', sa.Integer(), nullable=False),
    sa.Column('slot', sa.String(length=200), nullable=False),
    sa.Column('label', sa.String(length=10), nullable=False),
    sa.Column('reviewer', sa.String(length=200), nullable=False),
    sa.Column('token_id', sa.String(length=40), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('updated_at', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'dialogue_id', 'turn_index', 'slot', 'reviewer',
                        name='uq_labels_reviewer')
    )
    op.create_table('tokens',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('project_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('scopes', sa.String(length=100), nullable=False),
    sa.Column('spend_cap_usd', sa.Float(), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('last_used_at', sa.Float(), nullable=True),
    sa.Column('revoked_at', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('hash')
    )
    op.create_table('artifacts',
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('content_type', sa.String(length=100), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'name')
    )
    op.create_table('job_calls',
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('custom_id', sa.String(length=300), nullable=False),
    sa.Column('record', JSON, nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'custom_id')
    )
    op.create_table('judgments',
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('dialogue_id', sa.String(length=300), nullable=False),
    sa.Column('turn_index', sa.Integer(), nullable=False),
    sa.Column('verdict', sa.Boolean(), nullable=True),
    sa.Column('has_error', sa.Boolean(), nullable=False),
    sa.Column('row', JSON, nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', 'seq')
    )
    with op.batch_alter_table('judgments', schema=None) as batch_op:
        batch_op.create_index('ix_judgments_turn', ['job_id', 'dialogue_id', 'turn_index'],
                              unique=False)



def downgrade() -> None:
    with op.batch_alter_table('judgments', schema=None) as batch_op:
        batch_op.drop_index('ix_judgments_turn')

    op.drop_table('judgments')
    op.drop_table('job_calls')
    op.drop_table('artifacts')
    op.drop_table('tokens')
    op.drop_table('labels')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_queue')
        batch_op.drop_index('ix_jobs_project')

    op.drop_table('jobs')
    op.drop_table('files')
    op.drop_table('workers')
    op.drop_table('service_settings')
    op.drop_table('rate_waiters')
    op.drop_table('rate_pools')
    with op.batch_alter_table('rate_events', schema=None) as batch_op:
        batch_op.drop_index('ix_rate_events')

    op.drop_table('rate_events')
    op.drop_table('projects')
    op.drop_table('blobs')
