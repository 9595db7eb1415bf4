"""Usage per key: token tallies by minute, key id, model, tier and batch.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("start_time", sa.BigInteger, nullable=False),
        sa.Column("api_key_id", sa.String(128), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("service_tier", sa.String(16), nullable=False),
        sa.Column("batch", sa.Boolean, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("input_cached_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("num_model_requests", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_usage_time", "usage", ["kind", "start_time"])


def downgrade() -> None:
    op.drop_index("ix_usage_time", table_name="usage")
    op.drop_table("usage")
