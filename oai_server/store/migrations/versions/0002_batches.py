"""The Batch API's files, batches and finished batch lines.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(96), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(32), nullable=False),
        sa.Column("filename", sa.String(256), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_files_list", "files", ["owner", "created_at", "id"])
    op.create_table(
        "batches",
        sa.Column("id", sa.String(96), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("runner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("body", Json, nullable=False),
    )
    op.create_index("ix_batches_list", "batches", ["owner", "created_at", "id"])
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_table(
        "batch_lines",
        sa.Column("batch_id", sa.String(96), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("failed", sa.Boolean, nullable=False),
        sa.Column("body", Json, nullable=False),
        sa.PrimaryKeyConstraint("batch_id", "position", name="pk_batch_lines"),
    )


def downgrade() -> None:
    op.drop_table("batch_lines")
    op.drop_table("batches")
    op.drop_table("files")
