"""The response cache: what it holds, and the single flight of identical misses.

`ResponseCache` owns the backend, the metrics and the flights; for each request it
hands out a `CachedService` (see `service`), the chat, completions or embeddings service wrapped
so that a hit is replayed and a miss runs the engine and is recorded. Either way the
request goes through the one answer path, `oai_server.http.answer`.

A hit reports the `usage` of the answer it replays: the tokens of that prompt and that
answer, which is what clients use `usage` for (context bookkeeping, cost estimates),
with `prompt_tokens_details.cached_tokens` equal to `prompt_tokens`, as OpenAI reports
prompt tokens served from a cache; `x-cache: hit` says no engine time was spent at all.

A chat completion to be stored (`store: true`, or `--store-all`) is not cached: the
store keeps the engine's answer under the id the client got, through its own wrapper
of the chat service, which the route uses instead of this one.

`Cache-Control` on the request, as HTTP intends: `no-store` neither reads nor writes
the cache (nor waits for an identical request in flight); `no-cache` does not read it
but stores the fresh answer, replacing the entry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from fastapi import Request

from oai_server.cache.backend import CacheBackend
from oai_server.cache.embeddings import EmbeddingsEndpoint
from oai_server.cache.endpoints import ChatEndpoint, CompletionsEndpoint, Endpoint, Event
from oai_server.cache.entry import Entry, decode, encode
from oai_server.cache.flights import Flight, Flights
from oai_server.cache.metrics import CacheMetrics
from oai_server.cache.service import CachedService
from oai_server.caller import caller
from oai_server.embeddings.service import EmbeddingCall, EmbeddingJob
from oai_server.generation.engine_request import Usage
from oai_server.observability.spans import span
from oai_server.services.chat import ChatJob, ChatRequest
from oai_server.services.completion_batch import Batch, CompletionJob
from schemas.chat import CreateChatCompletionRequest
from schemas.completions import CreateCompletionRequest
from schemas.embeddings import CreateEmbeddingRequest

# How often a request waiting for another replica's answer looks for it.
REPLICA_POLL_S = 0.05


NO_DIRECTIVES: frozenset[str] = frozenset()


def _directives(request: Request) -> frozenset[str]:
    """The request's `Cache-Control` directives, from the raw headers (most requests send
    none, and a `Headers` view would cost more than the look)."""
    for name, value in request.scope["headers"]:
        if name == b"cache-control":
            text = value.decode("latin-1")
            return frozenset(part.strip().lower() for part in text.split(",") if part.strip())
    return NO_DIRECTIVES


class ResponseCache:
    """Answers chat, text completions and embeddings through the cache in `backend`."""

    def __init__(
        self,
        backend: CacheBackend,
        metrics: CacheMetrics,
        chat: ChatEndpoint,
        completions: CompletionsEndpoint,
        embeddings: EmbeddingsEndpoint | None = None,
        *,
        shared: bool = False,
    ) -> None:
        self.backend = backend
        self.metrics = metrics
        self._chat = chat
        self._completions = completions
        self._embeddings = embeddings
        self._shared = shared
        self._flights = Flights()
        self._releasing: set[asyncio.Task[None]] = set()
        metrics.track_bytes(backend.bytes_held)

    def chat(
        self, request: Request
    ) -> CachedService[CreateChatCompletionRequest, ChatJob, ChatRequest]:
        """The chat service, answering `request` through the cache."""
        return self.serving(request, self._chat)

    def completions(
        self, request: Request
    ) -> CachedService[CreateCompletionRequest, CompletionJob, Batch]:
        """The completions service, answering `request` through the cache."""
        return self.serving(request, self._completions)

    def embeddings(
        self, request: Request
    ) -> CachedService[CreateEmbeddingRequest, EmbeddingJob, EmbeddingCall] | None:
        """The embeddings service, answering `request` through the cache (None: the
        server serves no embedding model)."""
        if self._embeddings is None:
            return None
        return self.serving(request, self._embeddings)

    def serving(
        self, request: Request, endpoint: Endpoint[Any, Any, Any]
    ) -> CachedService[Any, Any, Any]:
        """`endpoint`'s service answering `request` through the cache (a feature's own
        endpoint, as rerank's)."""
        owner = None if self._shared else caller(request.scope)
        return CachedService(self, endpoint, owner, _directives(request))

    async def close(self) -> None:
        await self.backend.close()

    async def claim(self, key: str) -> bool:
        """Claim the answering of `key` among the replicas; False when another one has."""
        return await self.backend.claim(key)

    def missed(self) -> None:
        """Count a request the engine answers (a miss)."""
        self.metrics.misses.inc()

    def lead(self, key: str) -> Flight | None:
        """Lead the flight for `key` in this process; None when another request already does."""
        return self._flights.lead(key)

    async def stored(self, key: str, endpoint: Endpoint[Any, Any, Any]) -> Entry | None:
        """The stored entry of `key`, if any."""
        with span("cache.lookup") as traced:
            data = await self.backend.get(key)
            if traced is not None:
                traced.set_attribute("oai.cache.hit", data is not None)
        if data is not None:
            entry = decode(data, endpoint.restore)
            if entry is not None:
                self.metrics.hits.inc()
                return entry
            self.metrics.backend_errors.inc()
        return None

    async def in_flight(self, key: str, endpoint: Endpoint[Any, Any, Any]) -> Entry | None:
        """The outcome of an identical request in flight in this process, if any."""
        flight = self._flights.pending(key)
        if flight is None:
            return None
        with span("cache.wait_in_flight"):
            data = await flight
        entry = None if data is None else decode(data, endpoint.restore)
        if entry is not None:
            self.metrics.coalesced.inc()
        return entry

    async def from_replica(
        self, key: str, endpoint: Endpoint[Any, Any, Any], flight: Flight
    ) -> Entry | None:
        """The entry another replica is computing, once stored; None if it gives up.

        Polled: Redis has no cheap way to wait for a key, and a few tens of milliseconds
        matter little against the seconds an engine answer takes.
        """
        try:
            while True:
                await asyncio.sleep(REPLICA_POLL_S)
                data = await self.backend.get(key)
                if data is not None:
                    entry = decode(data, endpoint.restore)
                    if entry is not None:
                        flight.land(data)  # this replica's followers of the key too
                        self.metrics.coalesced.inc()
                    return entry
                if not await self.backend.claimed(key):
                    return None
        except BaseException:
            flight.land(None)
            raise

    def abandon(self, key: str, flight: Flight) -> None:
        """No entry will come from this request: followers go on, the claim is dropped."""
        if flight.landed:
            return
        flight.land(None)
        with contextlib.suppress(RuntimeError):  # no loop: the claim expires by itself
            task = asyncio.get_running_loop().create_task(self.backend.release(key))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def finish(
        self,
        key: str,
        store: bool,
        flight: Flight | None,
        events: Sequence[Event],
        usage: Usage,
    ) -> None:
        """Store the events of an answer that ended normally; its followers get them too."""
        if not store:
            return
        data = encode(events, usage)
        with span("cache.fill"):
            await self.backend.set(key, data)
        if flight is not None:
            flight.land(data)
            await self.backend.release(key)
