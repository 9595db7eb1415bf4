"""Route hints that outlive the gateway: what it learned, else what the store recorded.

Each replica records itself with every response it stores and every conversation turn
it adds (`store_objects.replica`). The gateway remembers the same from the answers going
by, but only in its own memory: a restarted gateway, or one of several, has not seen the
previous turn. Then it reads the store: one primary-key lookup, only for a request that
continues a response or conversation, names no `prompt_cache_key`, and missed the
memory; bounded by `LOOKUP_TIMEOUT_S`, and skipped (routing by key) when it fails.
Otherwise a request goes where its key's last request ran, as far as the gateway saw.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import SQLAlchemyError

from oai_server.ray_serve.affinity import ResponseReplicas, RouteHint, parse
from oai_server.store.interface import Store

logger = logging.getLogger(__name__)

# A slow database must cost a request little: past this, the turn routes by its key.
LOOKUP_TIMEOUT_S = 0.25


class RouteHints:
    """The `RouteHint` of each request body: learned replicas first, then the store's."""

    def __init__(self, learned: ResponseReplicas, store: Store | None) -> None:
        self.learned = learned
        self.store = store

    async def hint(self, body: bytes) -> RouteHint:
        route = parse(body)
        replica = None
        if route.previous is not None:
            replica = self.learned.get(route.previous)
            if replica is None and not route.by_cache_key:
                replica = await self.recorded(route.previous)
        if replica is None and route.key is not None:
            replica = self.learned.get(route.key)  # where the key's last request ran
        return RouteHint(key=route.key, replica=replica)

    async def recorded(self, object_id: str) -> str | None:
        """The replica the store recorded for `object_id` (None: unknown, or no answer)."""
        if self.store is None:
            return None
        try:
            replica = await asyncio.wait_for(self.store.replica_of(object_id), LOOKUP_TIMEOUT_S)
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            # Routing falls back to the key; the replicas report the store's troubles.
            logger.debug("no recorded replica for %s: %r", object_id, exc)
            return None
        if replica is not None:
            self.learned.remember(object_id, replica)
        return replica
