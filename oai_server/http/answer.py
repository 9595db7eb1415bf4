"""Answer a request to the engines: streamed as server-sent events, or whole as JSON.

Generation (chat, text completions) and embeddings alike; an embedding request is
always answered whole.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from fastapi import Request, Response

from oai_server.http.disconnect import Disconnect, until_disconnect
from oai_server.http.sse import EventStreamResponse
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


Req = TypeVar("Req", bound=Asked, contravariant=True)
Job = TypeVar("Job")
Handle = TypeVar("Handle")
Prepared = TypeVar("Prepared")
Started = TypeVar("Started")


class GenerationService(Protocol[Req, Job, Handle]):
    """What the chat, completions and embeddings services offer, and so every wrapper of
    them (the response cache's `CachedService`, the store's `RecordingChat`)."""

    async def prepare(self, req: Req) -> Job: ...

    async def start(self, job: Job, request_id: str | None = None) -> Handle: ...

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


def engine_request_id(request: Request, req: Asked) -> str | None:
    """The answer's and the engine request's id: OpenAI's prefix and the x-request-id
    (set by `ObservabilityMiddleware`), so logs and engine traces meet on one id."""
    request_id: str | None = request.scope.get("state", {}).get("request_id")
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


async def answer(
    request: Request, req: Req, service: GenerationService[Req, Job, Handle]
) -> Response:
    """Start the engine's work for `req`; stream it, or wait for the whole answer.

    The one path of every request to the engines, whatever `service` wraps (the response
    cache, the store's recording, or the engine's service itself). Everything that can
    be refused is refused before any status goes out. A client that leaves at any point,
    queued, in prefill or generating, cancels the work, and so aborts the engine request.
    """
    job = await service.prepare(req)
    request_id = engine_request_id(request, req)
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
        response = EventStreamResponse(service.stream(handle), disconnect)
    elif handle is not None:
        response = json_response(await service.complete(handle))  # ready: nothing to wait for
    else:
        handles: list[Handle] = []

        async def whole() -> ResponseModel:
            handles.append(await service.start(job, request_id))
            return await service.complete(handles[0])

        response = json_response(await until_disconnect(request, whole()))
        handle = handles[0]
    if shortcut is not None:
        response.raw_headers += shortcut.headers(handle)  # names of its own: appended
    return response
