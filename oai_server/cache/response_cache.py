"""The response cache at the route layer: a hit is replayed, a miss runs the engine.

A miss's events pass through to the client untouched (no extra cost per chunk) and are
recorded; when the answer has ended normally they become the entry. An answer that
failed, or whose client left, is never stored.

A hit reports the `usage` of the answer it replays: the tokens of that prompt and that
answer, which is what clients use `usage` for (context bookkeeping, cost estimates),
with `prompt_tokens_details.cached_tokens` equal to `prompt_tokens`, as OpenAI reports
prompt tokens served from a cache; `x-cache: hit` says no engine time was spent at all.

A chat completion to be stored (`store: true`, or `--store-all`) is not cached: the
store keeps the engine's answer under the id the client got, through its own hook.

`Cache-Control` on the request, as HTTP intends: `no-store` neither reads nor writes
the cache (nor waits for an identical request in flight); `no-cache` does not read it
but stores the fresh answer, replacing the entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import Any

from fastapi import Request, Response

from oai_server.auth.caller import caller
from oai_server.cache.backend import CacheBackend
from oai_server.cache.endpoints import ChatEndpoint, CompletionsEndpoint, Endpoint, Event
from oai_server.cache.entry import Entry, decode, encode
from oai_server.cache.flights import Flight, Flights
from oai_server.cache.key import cache_key, determined
from oai_server.cache.metrics import CacheMetrics
from oai_server.cache.replay import replay_stream, replay_whole
from oai_server.http.answer import answer_job, engine_request_id, json_response
from oai_server.http.disconnect import until_disconnect
from oai_server.http.sse import StreamTap, event_stream
from oai_server.services.common import StreamSettings
from oai_server.services.events import EventStream
from schemas.chat import CreateChatCompletionRequest
from schemas.common import CompletionUsage, GenerationRequest, ResponseModel
from schemas.completions import CreateCompletionRequest

HEADER = "x-cache"
# How often a request waiting for another replica's answer looks for it.
REPLICA_POLL_S = 0.05


def _directives(request: Request) -> set[str]:
    value = request.headers.get("cache-control", "")
    return {part.strip().lower() for part in value.split(",") if part.strip()}


class ResponseCache:
    """Answers chat and text completions through the cache in `backend`."""

    def __init__(
        self,
        backend: CacheBackend,
        metrics: CacheMetrics,
        chat: ChatEndpoint,
        completions: CompletionsEndpoint,
        *,
        shared: bool = False,
    ) -> None:
        self.backend = backend
        self.metrics = metrics
        self._chat = chat
        self._completions = completions
        self._shared = shared
        self._flights = Flights()
        self._releasing: set[asyncio.Task[None]] = set()
        metrics.track_bytes(backend.bytes_held)

    async def chat(self, request: Request, req: CreateChatCompletionRequest) -> Response:
        """Answer `POST /v1/chat/completions`."""
        return await self._answer(request, req, self._chat)

    async def completions(self, request: Request, req: CreateCompletionRequest) -> Response:
        """Answer `POST /v1/completions`."""
        return await self._answer(request, req, self._completions)

    async def close(self) -> None:
        await self.backend.close()

    async def _answer(
        self, request: Request, req: GenerationRequest, endpoint: Endpoint[Any, Any, Any]
    ) -> Response:
        service = endpoint.service
        job = service.prepare(req)
        if (
            not determined(endpoint.options(job))
            or StreamSettings.of(req.stream_options).continuous_usage
        ):
            return await answer_job(request, req, service, job)
        principal = None if self._shared else caller(request.scope)
        key = cache_key(
            endpoint.kind,
            principal,
            endpoint.prompts(job),
            endpoint.key_material(req, job),
        )
        directives = _directives(request)
        read = not directives & {"no-store", "no-cache"}
        if read:
            entry = await self._lookup(request, key, endpoint)
            if entry is not None:
                replay = replay_stream if req.stream else replay_whole
                response = replay(endpoint, req, entry, engine_request_id(request, req))
                response.headers[HEADER] = "hit"
                return response
        store = "no-store" not in directives
        flight = self._flights.lead(key) if store else None
        if flight is not None and read and not await self.backend.claim(key):
            # Another replica is answering this very request: wait for its entry.
            entry = await self._from_replica(request, key, endpoint, flight)
            if entry is not None:
                replay = replay_stream if req.stream else replay_whole
                response = replay(endpoint, req, entry, engine_request_id(request, req))
                response.headers[HEADER] = "hit"
                return response
        self.metrics.misses.inc()
        try:
            response = await self._run(request, req, job, endpoint, key, store, flight)
        except BaseException:
            if flight is not None:
                self._abandon(key, flight)
            raise
        response.headers[HEADER] = "miss"
        return response

    async def _from_replica(
        self, request: Request, key: str, endpoint: Endpoint[Any, Any, Any], flight: Flight
    ) -> Entry | None:
        """The entry another replica is computing, once stored; None if it gives up.

        Polled: Redis has no cheap way to wait for a key, and a few tens of milliseconds
        matter little against the seconds an engine answer takes.
        """

        async def poll() -> Entry | None:
            while True:
                await asyncio.sleep(REPLICA_POLL_S)
                data = await self.backend.get(key)
                if data is not None:
                    entry = decode(data, endpoint.chunk_model)
                    if entry is not None:
                        flight.land(data)  # this replica's followers of the key too
                        self.metrics.coalesced.inc()
                    return entry
                if not await self.backend.claimed(key):
                    return None

        try:
            return await until_disconnect(request, poll())
        except BaseException:
            flight.land(None)
            raise

    def _abandon(self, key: str, flight: Flight) -> None:
        """No entry will come from this request: followers go on, the claim is dropped."""
        if flight.landed:
            return
        flight.land(None)
        with contextlib.suppress(RuntimeError):  # no loop: the claim expires by itself
            task = asyncio.get_running_loop().create_task(self.backend.release(key))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _lookup(
        self, request: Request, key: str, endpoint: Endpoint[Any, Any, Any]
    ) -> Entry | None:
        """A stored entry, else the outcome of an identical request in flight, else None."""
        data = await self.backend.get(key)
        if data is not None:
            entry = decode(data, endpoint.chunk_model)
            if entry is not None:
                self.metrics.hits.inc()
                return entry
            self.metrics.backend_errors.inc()
        flight = self._flights.pending(key)
        if flight is None:
            return None
        data = await until_disconnect(request, flight)
        entry = None if data is None else decode(data, endpoint.chunk_model)
        if entry is not None:
            self.metrics.coalesced.inc()
        return entry

    async def _finish(
        self,
        key: str,
        store: bool,
        flight: Flight | None,
        events: list[Event],
        usage: CompletionUsage,
    ) -> None:
        if not store:
            return
        data = encode(events, usage)
        await self.backend.set(key, data)
        if flight is not None:
            flight.land(data)
            await self.backend.release(key)

    async def _run(
        self,
        request: Request,
        req: GenerationRequest,
        job: Any,
        endpoint: Endpoint[Any, Any, Any],
        key: str,
        store: bool,
        flight: Flight | None,
    ) -> Response:
        """Answer from the engine, recording the events; store them once the answer is whole."""
        service = endpoint.service
        request_id = engine_request_id(request, req)
        if endpoint.whole_only(job):

            async def ranked() -> ResponseModel:
                return await service.complete(await service.start(job, request_id))

            whole = await until_disconnect(request, ranked())
            usage = getattr(whole, "usage", None)
            if usage is not None:
                await self._finish(key, store, flight, endpoint.whole_events(whole), usage)
            return json_response(whole)
        handle = await until_disconnect(request, service.start(job, request_id))
        stream: EventStream[Any] = service.stream(handle)
        if req.stream:
            tap = StreamTap(
                lambda events: self._finish(key, store, flight, events, endpoint.usage(handle)),
                lambda: None if flight is None else self._abandon(key, flight),
            )
            # Starlette watches the connection from here, as for any stream.
            response = event_stream(stream, tap)
            if flight is not None:
                # A stream whose body never starts (its client gone first) still lands.
                weakref.finalize(response.body_iterator, self._abandon, key, flight)
            return response

        async def whole_answer() -> Response:
            events = [event async for event in stream]
            await self._finish(key, store, flight, events, endpoint.usage(handle))
            id_, created = endpoint.identity(handle)
            usage = endpoint.usage(handle)
            return json_response(endpoint.assemble(req, events, usage, id_, created))

        return await until_disconnect(request, whole_answer())
