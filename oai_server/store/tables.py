"""The store's schema, one for every kind of stored object.

Three tables, shared by chat completions now and by the Responses API later:

- `store_objects`: one row per stored object (`kind`: `chat.completion`, later `response` and
  `conversation`), its wire body, owner, model, metadata and sort key. `parent_id` leaves room
  for a response's `previous_response_id` or conversation; `status` for background responses.
- `store_items`: the ordered items of an object, keyed by parent id and position: a chat
  completion's request messages now; a response's input and output items and a
  conversation's items later (`section` tells them apart, `kind` says what an item is).
- `store_metadata`: one row per metadata pair, with the object's kind, owner and sort key
  copied in, so a `metadata[key]=value` filter reads one index range already in list order.

`created_at` is the sort key in microseconds (the wire `created` is whole seconds, too coarse
to order by); ties are broken by id, so (created_at, id) orders every list totally.

Since revision 0003, `store_objects.replica`: the Ray Serve replica that served a response or
a conversation's latest turn, where its prefix is cached (the affinity gateway reads it).

The Batch API's (`oai_server.batch`) since revision 0002:

- `files`: uploaded and produced files (`purpose`: `batch`, `batch_output`), their bytes in
  the row, so every replica that reaches the database reaches the file.
- `batches`: one row per batch, its wire body, and who runs it (`runner`, until `lease_until`).
- `batch_lines`: one row per finished input line (its output or error line), keyed by its
  position: a line's result and the batch's progress are the same row, written once.

Images (`oai_server.store.images`) since revision 0005:

- `store_images`: the bytes of each image that stored items name, once, keyed by their
  SHA-256 (`sha256`, hex); the items hold a reference to it, not a copy per turn.

Since revision 0006:

- `store_image_refs`: which item holds which image (its object's id, its own id, the
  hash). Reading an item puts back only its own images; an image's bytes go with its
  last reference.

Usage per key (`oai_server.usage`) since revision 0004:

- `usage`: token tallies by minute (`start_time`, Unix seconds), kind (`completions`,
  `embeddings`), API key id, model, service tier and batch or not. A replica appends one
  row per group and minute each time it writes (several rows may share a group and
  minute: reads sum them), so replicas never contend for a row.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()

Json = JSON().with_variant(JSONB(), "postgresql")

ID_LENGTH = 96
KEY_LENGTH = 64
VALUE_LENGTH = 512
REPLICA_LENGTH = 64

objects = Table(
    "store_objects",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("owner", String(128), nullable=False),
    Column("model", String(256), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("status", String(32), nullable=True),
    Column("parent_id", String(ID_LENGTH), nullable=True),
    Column("replica", String(REPLICA_LENGTH), nullable=True),
    Column("meta", Json, nullable=False),
    Column("request", Json, nullable=True),
    Column("body", Json, nullable=False),
    Index("ix_store_objects_list", "kind", "owner", "created_at", "id"),
    Index("ix_store_objects_model", "kind", "owner", "model", "created_at", "id"),
    Index("ix_store_objects_created", "created_at"),
    Index("ix_store_objects_parent", "parent_id"),
)

items = Table(
    "store_items",
    metadata,
    Column("parent_id", String(ID_LENGTH), nullable=False),
    Column("position", Integer, nullable=False),
    Column("id", String(ID_LENGTH), nullable=False),
    Column("section", String(16), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("body", Json, nullable=False),
    PrimaryKeyConstraint("parent_id", "position", name="pk_store_items"),
    Index("ix_store_items_id", "parent_id", "id", unique=True),
)

metadata_pairs = Table(
    "store_metadata",
    metadata,
    Column("object_id", String(ID_LENGTH), nullable=False),
    Column("key", String(KEY_LENGTH), nullable=False),
    Column("value", String(VALUE_LENGTH), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("owner", String(128), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("object_id", "key", name="pk_store_metadata"),
    Index("ix_store_metadata_filter", "kind", "owner", "key", "value", "created_at", "object_id"),
)

files = Table(
    "files",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("owner", String(128), nullable=False),
    Column("purpose", String(32), nullable=False),
    Column("filename", String(256), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Index("ix_files_list", "owner", "created_at", "id"),
)

images = Table(
    "store_images",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
)

image_refs = Table(
    "store_image_refs",
    metadata,
    Column("parent_id", String(ID_LENGTH), nullable=False),
    Column("item_id", String(ID_LENGTH), nullable=False),
    Column("sha256", String(64), nullable=False),
    PrimaryKeyConstraint("parent_id", "item_id", "sha256", name="pk_store_image_refs"),
    Index("ix_store_image_refs_sha256", "sha256"),
)

batches = Table(
    "batches",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("owner", String(128), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("status", String(32), nullable=False),
    Column("runner", String(64), nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("body", Json, nullable=False),
    Index("ix_batches_list", "owner", "created_at", "id"),
    Index("ix_batches_status", "status"),
)

batch_lines = Table(
    "batch_lines",
    metadata,
    Column("batch_id", String(ID_LENGTH), nullable=False),
    Column("position", Integer, nullable=False),
    Column("failed", Boolean, nullable=False),
    Column("body", Json, nullable=False),
    PrimaryKeyConstraint("batch_id", "position", name="pk_batch_lines"),
)

usage = Table(
    "usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("start_time", BigInteger, nullable=False),
    Column("api_key_id", String(128), nullable=False),
    Column("model", String(256), nullable=False),
    Column("service_tier", String(16), nullable=False),
    Column("batch", Boolean, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("input_cached_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("num_model_requests", BigInteger, nullable=False),
    Index("ix_usage_time", "kind", "start_time"),
)
