"""The Ray Serve replica that served a response or a conversation's latest turn.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, no default: adding it rewrites no rows, on SQLite or PostgreSQL.
    op.add_column("store_objects", sa.Column("replica", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("store_objects") as batch:
        batch.drop_column("replica")
