"""Stored objects, their items and their metadata pairs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "store_objects",
        sa.Column("id", sa.String(96), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(32), nullable=True),
        sa.Column("parent_id", sa.String(96), nullable=True),
        sa.Column("meta", Json, nullable=False),
        sa.Column("request", Json, nullable=True),
        sa.Column("body", Json, nullable=False),
    )
    op.create_index("ix_store_objects_list", "store_objects", ["kind", "owner", "created_at", "id"])
    op.create_index(
        "ix_store_objects_model", "store_objects", ["kind", "owner", "model", "created_at", "id"]
    )
    op.create_index("ix_store_objects_created", "store_objects", ["created_at"])
    op.create_index("ix_store_objects_parent", "store_objects", ["parent_id"])
    op.create_table(
        "store_items",
        sa.Column("parent_id", sa.String(96), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("id", sa.String(96), nullable=False),
        sa.Column("section", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("body", Json, nullable=False),
        sa.PrimaryKeyConstraint("parent_id", "position", name="pk_store_items"),
    )
    op.create_index("ix_store_items_id", "store_items", ["parent_id", "id"], unique=True)
    op.create_table(
        "store_metadata",
        sa.Column("object_id", sa.String(96), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("object_id", "key", name="pk_store_metadata"),
    )
    op.create_index(
        "ix_store_metadata_filter",
        "store_metadata",
        ["kind", "owner", "key", "value", "created_at", "object_id"],
    )


def downgrade() -> None:
    op.drop_table("store_metadata")
    op.drop_table("store_items")
    op.drop_table("store_objects")
