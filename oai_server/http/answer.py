"""Answer a request to the engines: streamed as server-sent events, or whole as JSON.

One flow for every API: chat, text completions, embeddings and rerank (OpenAI's chunks,
`CHUNKS`; an embedding or a score is always answered whole), Responses and Anthropic's
messages, each through its `Encoder`. What the flow does (refusals before the 200, the
trace's GenAI attributes, the cache's stored answers, the watch of the client, the one
stream response) every API gets, and gets whatever is added to it later.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar, overload

from fastapi import Request, Response

from oai_server.http.disconnect import Disconnect, until_disconnect
from oai_server.http.sse import ChunkWriter, EventStreamResponse, EventWriter, Ping
from oai_server.observability.spans import current_tracer, describe_request
from oai_server.services.events import EventStream
from schemas.chat import CreateChatCompletionRequest
from schemas.common import ResponseModel
from schemas.embeddings import CreateEmbeddingRequest
from schemas.rerank import ScoringFields


class Asked(Protocol):
    """What `answer` reads of a request: whether to stream the answer."""

    @property
    def stream(self) -> bool | None: ...


class Prompted(Protocol):
    """What an encoder may read of a prepared job, whatever wraps it (the cache's)."""

    @property
    def prompt_tokens(self) -> int:
        """The prompt's length in tokens, before the engine's counts come."""


Req = TypeVar("Req", bound=Asked, contravariant=True)
Job = TypeVar("Job")
Handle = TypeVar("Handle")
Prepared = TypeVar("Prepared")
Started = TypeVar("Started")
Service = TypeVar("Service", contravariant=True)
JobIn = TypeVar("JobIn", contravariant=True)
HandleIn = TypeVar("HandleIn", contravariant=True)
HandleOut = TypeVar("HandleOut", covariant=True)


class Starting(Protocol[Req, Job, HandleOut]):
    """What `answer` calls of a service: prepare a request (every refusal), start it."""

    async def prepare(self, req: Req) -> Job: ...

    async def start(self, job: Job, request_id: str | None = None) -> HandleOut: ...


AnyStarting = TypeVar("AnyStarting", bound=Starting[Any, Any, Any])


class GenerationService(Starting[Req, Job, Handle], Protocol[Req, Job, Handle]):
    """What the chat, completions and embeddings services offer, and so every wrapper of
    them (the response cache's `CachedService`, the store's `RecordingChat`)."""

    def stream(self, handle: Handle) -> EventStream[ResponseModel]: ...

    async def complete(self, handle: Handle) -> ResponseModel: ...


class Shortcut(Generic[Prepared, Started]):
    """A wrapper of a service that may answer without generating: the response cache.

    A plain base class, not a protocol or an ABC: `isinstance` on a runtime protocol costs
    tens of microseconds per request, on a plain class tens of nanoseconds.
    """

    async def ready(self, job: Prepared, request_id: str | None) -> Started | None:
        """The answer to `job` if it is there without waiting (a stored entry), else None.

        Not raced against the client leaving: a whole task group would cost more than
        the lookup, and a hit's time to first token is the cache's point.
        """
        return None

    def headers(self, handle: Started) -> list[tuple[bytes, bytes]]:
        """The headers of the answer `handle` (`x-cache`), as ASGI sends them."""
        return []


def engine_request_id(request: Request, req: Asked, job: object = None) -> str | None:
    """The answer's and the engine request's id: OpenAI's prefix and the x-request-id
    (set by `ObservabilityMiddleware`, which every app has: the scope's state is there),
    so logs and engine traces meet on one id. `job` is not read: it is there as an
    `Encoder.answer_id` takes it (`CHUNKS`)."""
    request_id: str | None = request.scope["state"].get("request_id")
    if request_id is None:
        return None
    if isinstance(req, CreateChatCompletionRequest):
        prefix = "chatcmpl"
    elif isinstance(req, CreateEmbeddingRequest):
        prefix = "embd"
    elif isinstance(req, ScoringFields):
        prefix = "score"  # as vLLM names its rerank and score answers
    else:
        prefix = "cmpl"
    return f"{prefix}-{request_id}"


def json_response(body: ResponseModel, status_code: int = 200) -> Response:
    return Response(body.to_json(), status_code, media_type="application/json")


class Encoder(Protocol[Service, JobIn, HandleIn]):
    """One API's answer on the wire, plugged into `answer`: its id, its stream's writer
    (`oai_server.http.sse`), its whole answer. OpenAI's chunks (`CHUNKS`), Responses'
    events (`oai_server.responses.sse`), Anthropic's (`oai_server.anthropic.sse`)."""

    @property
    def ping(self) -> Ping | None:
        """What keeps an idle stream alive, if this wire has it."""

    def answer_id(self, request: Request, req: Any, job: JobIn) -> str | None:
        """The answer's id, which is its engine request's too; None: the service's own."""

    def stream(
        self, service: Service, job: JobIn, handle: HandleIn, answer_id: str | None
    ) -> EventWriter:
        """The writer of the started answer `handle`, streamed."""

    async def whole(
        self, service: Service, job: JobIn, handle: HandleIn, answer_id: str | None
    ) -> ResponseModel:
        """The started answer `handle`, whole."""


class Chunked:
    """OpenAI's chunks: chat and text completions, streamed or whole (an embedding or a
    score, always whole)."""

    ping = None
    # As they are, not wrapped in a method: each would be a call more per request, on
    # the busiest path.
    answer_id = staticmethod(engine_request_id)
    stream = ChunkWriter

    async def whole(
        self,
        service: GenerationService[Any, Job, Handle],
        job: Job,
        handle: Handle,
        answer_id: str | None,
    ) -> ResponseModel:
        return await service.complete(handle)


CHUNKS = Chunked()


@overload
async def answer(
    request: Request, req: Req, service: GenerationService[Req, Job, Handle]
) -> Response: ...


@overload
async def answer(
    request: Request, req: Asked, service: AnyStarting, encoder: Encoder[AnyStarting, Any, Any]
) -> Response: ...


async def answer(
    request: Request,
    req: Req,
    service: Starting[Req, Job, Handle],
    encoder: Encoder[Any, Job, Handle] = CHUNKS,
) -> Response:
    """Start the engine's work for `req`; stream it, or wait for the whole answer, as
    `encoder`'s API sends it (OpenAI's chunks unless told).

    The one path of every request to the engines, whatever `service` wraps (the response
    cache, the store's recording, or the engine's service itself) and whatever the API:
    so tracing, the cache, the direct sending of a stream and the disconnect handling are
    done here once. Everything that can be refused is refused before any status goes
    out. A client that leaves at any point, queued, in prefill or generating, cancels the
    work, and so aborts the engine request.
    """
    job = await service.prepare(req)
    request_id = encoder.answer_id(request, req, job)
    if current_tracer.get() is not None:
        describe_request(req, request_id)
    shortcut = service if isinstance(service, Shortcut) else None
    handle: Handle | None = None
    if shortcut is not None:
        handle = await shortcut.ready(job, request_id)
    response: Response
    if req.stream:
        disconnect = None
        if handle is None:
            disconnect = Disconnect(request.receive)
            try:
                handle = await disconnect.guard(service.start(job, request_id))
            except BaseException:
                disconnect.stop()
                raise
        # From here the response watches the connection and cancels the stream on disconnect.
        writer = encoder.stream(service, job, handle, request_id)
        response = EventStreamResponse(writer, disconnect, encoder.ping)
    elif handle is not None:  # ready: nothing to wait for
        response = json_response(await encoder.whole(service, job, handle, request_id))
    else:
        handles: list[Handle] = []

        async def whole() -> ResponseModel:
            handles.append(await service.start(job, request_id))
            return await encoder.whole(service, job, handles[0], request_id)

        response = json_response(await until_disconnect(request, whole()))
        handle = handles[0]
    if shortcut is not None:
        response.raw_headers += shortcut.headers(handle)  # names of its own: appended
    return response
