"""The chat or completions service, answering one request through the response cache.

`CachedService` has the interface of the service it wraps (`GenerationService`), as the
store's `RecordingChat` has, so `oai_server.http.answer` answers a hit, a miss and an
uncacheable request alike. `start` looks the request up (a stored entry, an identical
request in flight here, or another replica's claim) and starts the engine only on a
miss; `stream` and `complete` replay a hit, or pass a miss's events through untouched
and store them once the answer has ended normally. An answer that failed, or whose
client left, is never stored. `headers` says `x-cache: hit` or `miss`.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from oai_server.cache.endpoints import Endpoint, Event, Streamed
from oai_server.cache.entry import Entry
from oai_server.cache.flights import Flight
from oai_server.cache.key import cache_key
from oai_server.cache.replay import replay_stream, replay_whole
from oai_server.generation.engine_request import Usage
from oai_server.http.answer import Asked, Prompted, Shortcut
from oai_server.services.events import EventStream
from schemas.common import GenerationRequest, ResponseModel

HEADER = "x-cache"
_HEADERS = {value: [(HEADER.encode(), value.encode())] for value in ("hit", "miss")}

Req = TypeVar("Req", bound=Asked)
Job = TypeVar("Job", bound=Prompted)
Handle = TypeVar("Handle")


class Cache(Protocol):
    """The cache as a request's answer uses it (`ResponseCache`): entries, the flights of
    identical misses, and the claims replicas make on a key."""

    async def stored(self, key: str, endpoint: Endpoint[Any, Any, Any]) -> Entry | None: ...

    async def in_flight(self, key: str, endpoint: Endpoint[Any, Any, Any]) -> Entry | None: ...

    def lead(self, key: str) -> Flight | None: ...

    async def claim(self, key: str) -> bool: ...

    async def from_replica(
        self, key: str, endpoint: Endpoint[Any, Any, Any], flight: Flight
    ) -> Entry | None: ...

    def missed(self) -> None: ...

    def abandon(self, key: str, flight: Flight) -> None: ...

    async def finish(
        self,
        key: str,
        store: bool,
        flight: Flight | None,
        events: Sequence[Event],
        usage: Usage,
    ) -> None: ...


@dataclass
class CacheJob(Generic[Req, Job]):
    """A prepared job, and its key when its answer may come from the cache."""

    req: Req
    job: Job
    key: str | None

    @property
    def prompt_tokens(self) -> int:
        return self.job.prompt_tokens


@dataclass
class CacheAnswer(Generic[Req, Job, Handle]):
    """A started answer: an entry to replay (`entry`), or the engine's (`handle`).

    `header` is the `x-cache` value, None for a request the cache does not answer.
    """

    job: CacheJob[Req, Job]
    header: str | None
    handle: Handle | None = None
    entry: Entry | None = None
    identity: tuple[str, int] = ("", 0)
    store: bool = False
    flight: Flight | None = None


@dataclass
class CachedService(
    Shortcut[CacheJob[Req, Job], CacheAnswer[Req, Job, Handle]], Generic[Req, Job, Handle]
):
    """`endpoint.service`, its answers read from and written to `cache`."""

    cache: Cache
    endpoint: Endpoint[Req, Job, Handle]
    owner: str | None  # whose entries these are; None when shared
    directives: frozenset[str]  # the request's Cache-Control

    async def prepare(self, req: Req) -> CacheJob[Req, Job]:
        job = await self.endpoint.service.prepare(req)
        if not self.endpoint.cacheable(req, job):
            return CacheJob(req, job, None)
        key_material = self.endpoint.key_material(req, job)
        key = cache_key(self.endpoint.kind, self.owner, self.endpoint.prompts(job), key_material)
        return CacheJob(req, job, key)

    async def ready(
        self, job: CacheJob[Req, Job], request_id: str | None
    ) -> CacheAnswer[Req, Job, Handle] | None:
        """A hit on a stored entry; None leaves the rest to `start`."""
        if job.key is None or not self._reads:
            return None
        entry = await self.cache.stored(job.key, self.endpoint)
        return None if entry is None else self._hit(job, entry, request_id)

    @property
    def _reads(self) -> bool:
        return not self.directives & {"no-store", "no-cache"}

    async def start(
        self, job: CacheJob[Req, Job], request_id: str | None = None
    ) -> CacheAnswer[Req, Job, Handle]:
        """The answer of an identical request in flight, else the engine's (a miss)."""
        service, key = self.endpoint.service, job.key
        if key is None:
            return CacheAnswer(job, None, await service.start(job.job, request_id))
        read = self._reads
        if read:
            entry = await self.cache.in_flight(key, self.endpoint)
            if entry is not None:
                return self._hit(job, entry, request_id)
        store = "no-store" not in self.directives
        flight = self.cache.lead(key) if store else None
        try:
            if flight is not None and read and not await self.cache.claim(key):
                # Another replica is answering this very request: wait for its entry.
                entry = await self.cache.from_replica(key, self.endpoint, flight)
                if entry is not None:
                    return self._hit(job, entry, request_id)
            self.cache.missed()
            handle = await service.start(job.job, request_id)
        except BaseException:
            if flight is not None:
                self.cache.abandon(key, flight)
            raise
        return CacheAnswer(job, "miss", handle, store=store, flight=flight)

    def _hit(
        self, job: CacheJob[Req, Job], entry: Entry, request_id: str | None
    ) -> CacheAnswer[Req, Job, Handle]:
        identity = self.endpoint.fresh_identity(request_id)
        return CacheAnswer(job, "hit", entry=entry, identity=identity)

    def stream(self, answer: CacheAnswer[Req, Job, Handle]) -> EventStream[ResponseModel]:
        if answer.entry is not None:
            req, endpoint = answer.job.req, self.endpoint
            # Only generation is ever streamed (an embedding is answered whole).
            assert isinstance(req, GenerationRequest)
            assert isinstance(endpoint, Streamed)
            return replay_stream(endpoint, req, answer.entry, answer.identity)
        assert answer.handle is not None
        inner = self.endpoint.service.stream(answer.handle)
        if answer.header is None:
            return inner
        events = self._recorded(answer, answer.handle, inner)
        if answer.flight is not None:
            # A stream whose body never starts (its client gone first) still lands.
            assert answer.job.key is not None
            weakref.finalize(events, self.cache.abandon, answer.job.key, answer.flight)
        return EventStream(events, inner.chunks)

    async def _recorded(
        self,
        answer: CacheAnswer[Req, Job, Handle],
        handle: Handle,
        inner: EventStream[ResponseModel],
    ) -> AsyncIterator[Event]:
        """The miss's events, untouched; stored once the last has gone out, before `[DONE]`."""
        key = answer.job.key
        assert key is not None
        events: list[Event] = []
        try:
            async for event in inner:
                events.append(event)
                yield event
        except BaseException:
            if answer.flight is not None:
                self.cache.abandon(key, answer.flight)
            raise
        usage = self.endpoint.usage(handle)
        await self.cache.finish(key, answer.store, answer.flight, events, usage)

    async def complete(self, answer: CacheAnswer[Req, Job, Handle]) -> ResponseModel:
        job, service = answer.job, self.endpoint.service
        if answer.entry is not None:
            return replay_whole(self.endpoint, job.req, answer.entry, answer.identity)
        assert answer.handle is not None
        if answer.header is None:
            return await service.complete(answer.handle)
        key = job.key
        assert key is not None
        try:
            if self.endpoint.whole_only(job.job):
                whole = await service.complete(answer.handle)
                usage = self.endpoint.whole_usage(whole)
                if usage is not None:
                    events = self.endpoint.whole_events(whole)
                    await self.cache.finish(key, answer.store, answer.flight, events, usage)
                elif answer.flight is not None:
                    self.cache.abandon(key, answer.flight)
                return whole
            events = [event async for event in service.stream(answer.handle)]
            usage = self.endpoint.usage(answer.handle)
            await self.cache.finish(key, answer.store, answer.flight, events, usage)
        except BaseException:
            if answer.flight is not None:
                self.cache.abandon(key, answer.flight)
            raise
        id_, created = self.endpoint.identity(answer.handle)
        return self.endpoint.assemble(job.req, events, usage, id_, created)

    def headers(self, answer: CacheAnswer[Req, Job, Handle]) -> list[tuple[bytes, bytes]]:
        """`x-cache: hit` or `miss`; nothing for a request the cache does not answer."""
        return [] if answer.header is None else list(_HEADERS[answer.header])
