"""Which stored item holds which image; images no item refers to are dropped.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# A reference as `oai_server.store.images` writes it: `oai-image:<sha256 hex>:...`.
_REFERENCE = re.compile(r"oai-image:([0-9a-f]{64}):")


def upgrade() -> None:
    refs = op.create_table(
        "store_image_refs",
        sa.Column("parent_id", sa.String(96), nullable=False),
        sa.Column("item_id", sa.String(96), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("parent_id", "item_id", "sha256", name="pk_store_image_refs"),
    )
    op.create_index("ix_store_image_refs_sha256", "store_image_refs", ["sha256"])
    conn = op.get_bind()
    stored = {row[0] for row in conn.execute(sa.text("SELECT sha256 FROM store_images"))}
    # Each item's references (only those whose bytes are stored: a reference without
    # them is text a client wrote), found in its body's text.
    body = sa.cast(sa.column("body"), sa.Text)
    query: sa.Select[str, str, str] = sa.select(
        sa.column("parent_id", sa.String), sa.column("id", sa.String), body
    ).select_from(sa.table("store_items"))
    rows = [
        {"parent_id": parent_id, "item_id": item_id, "sha256": digest}
        for parent_id, item_id, text in conn.execute(query.where(body.like("%oai-image:%")))
        for digest in set(_REFERENCE.findall(text)) & stored
    ]
    if rows:
        op.bulk_insert(refs, rows)
    # The bytes of images whose items were deleted before references were kept.
    conn.execute(
        sa.text(
            "DELETE FROM store_images WHERE NOT EXISTS "
            "(SELECT 1 FROM store_image_refs r WHERE r.sha256 = store_images.sha256)"
        )
    )


def downgrade() -> None:
    op.drop_index("ix_store_image_refs_sha256", "store_image_refs")
    op.drop_table("store_image_refs")
