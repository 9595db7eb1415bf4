"""`WS /v1/responses`: WebSocket mode, Responses over one long-lived socket.

Each `response.create` client event (a `POST /v1/responses` body with `type`) is
answered with the events the SSE stream sends, each as one JSON text frame, one response
at a time, in the order they came. A response continues the socket's latest one from
memory (`chain`), `store: false` too. `generate: false` prepares a turn (its prompt is
prefilled, so vLLM's prefix cache holds it) and answers an empty response to continue.

Keys and rate limits are checked at the handshake by the same middleware as HTTP; the
handshake counts as the first turn's request, and each later `response.create` counts
one more against the key's request limit (`take_request`), a turn over it refused with a
429 error event. Tokens count per turn as they are generated; service tiers and the
prefix-cache salt per turn as over HTTP. A socket lives at most
`--responses-ws-max-lifetime` (OpenAI's 60 minutes): past it, once no answer is in
progress, it gets a `websocket_connection_limit_reached` error and is closed. Errors
are the spec's `ResponseWsError` events, and the socket stays open after them. A socket
that closes mid-answer cancels its turn, which aborts the engine request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from oai_server.caller import caller
from oai_server.error_responses import to_openai_error
from oai_server.errors import InvalidRequestError
from oai_server.generation.engine_request import Generation
from oai_server.responses.chain import Chain, SocketResponses
from oai_server.responses.service import ResponseJob
from oai_server.responses.state import ResponseState
from oai_server.responses.stream import TextDeltaOut
from oai_server.services.common import response_usage
from oai_server.state import ServerState
from oai_server.store.service import StoreService, owner_of
from schemas.response_events import ResponseLifecycleEvent
from schemas.responses import CreateResponse

# RFC 6455 close codes.
NORMAL_CLOSURE = 1000
MESSAGE_TOO_BIG = 1009
# The statuses that mean the turn ended badly: its `previous_response_id` is forgotten.
_FAILED = frozenset({"failed", "cancelled"})

# Counts one request against the caller's request limit; raises `RateLimitError` to refuse.
TakeRequest = Callable[[str | None], Awaitable[object]]


def ws_error(exc: BaseException, sequence_number: int | None = None) -> dict[str, Any]:
    """The spec's `ResponseWsError`: the HTTP status the error would have had, and the
    error object; a `sequence_number` once the response's events have started. Its `code`
    is never null (Open Responses' `WebSocketErrorEvent` requires a string): an error
    without a code of its own has its type's."""
    error = to_openai_error(exc)
    event: dict[str, Any] = {
        "type": "error",
        "status": error.status_code,
        "error": {
            "type": error.type,
            "code": error.code or error.type,
            "message": error.message,
            "param": error.param,
        },
    }
    if sequence_number is not None:
        event["sequence_number"] = sequence_number
    return event


class ResponseSocket:
    """One socket's turns: each `response.create` parsed, answered, and its chain kept."""

    def __init__(
        self,
        websocket: WebSocket,
        core: ServerState,
        store: StoreService | None,
        take_request: TakeRequest | None = None,
    ):
        self.websocket = websocket
        self.core = core
        self.take_request = take_request
        # The handshake was counted as one request: it pays for the first turn.
        self.counted = True
        self.chain = Chain()
        # The next event's sequence number once a response's events began (None before).
        self.sequence: int | None = None
        replica = core.replica
        self.state = None if store is None else ResponseState(store, owner_of(websocket), replica)

    async def send(self, event: dict[str, Any] | bytes, lane: str | None) -> None:
        text = event.decode() if isinstance(event, bytes) else json.dumps(event)
        if lane is not None:  # echoed on every event of the lane's responses
            text = '{"stream_id":' + json.dumps(lane) + "," + text[1:]
        await self.websocket.send_text(text)

    async def turn(self, text: str) -> None:
        """Answer one client event; every refusal or failure is an `error` event."""
        lane: str | None = None
        previous: str | None = None
        self.sequence = None
        try:
            doc = _event(text)
            await self._count()
            raw_lane = doc.get("stream_id")
            lane = raw_lane if isinstance(raw_lane, str) else None
            req = CreateResponse.model_validate_json(text, strict=True)
            previous = req.previous_response_id
            await self._answer(req, generate=doc.get("generate") is not False, lane=lane)
        except WebSocketDisconnect:
            raise  # the client is gone: nobody to tell
        except Exception as exc:  # noqa: BLE001 - every failure reaches the client as an event
            if previous is not None:
                self.chain.forget(previous)
            # Unexpected ones are logged with their traceback there; the client gets a 500.
            await self.send(ws_error(exc, self.sequence), lane)

    async def _count(self) -> None:
        """Count this turn against the caller's request limit (the first is the handshake's)."""
        if self.counted:
            self.counted = False
        elif self.take_request is not None:
            await self.take_request(caller(self.websocket.scope))

    async def _answer(self, req: CreateResponse, *, generate: bool, lane: str | None) -> None:
        req = self.core.for_caller(req, caller(self.websocket.scope))
        service = SocketResponses(self.core.chat, self.state, self.core.secret, chain=self.chain)
        job = await service.prepare(req)
        if not generate:
            await self._warm(service, job, lane)
            return
        chat = await service.start(job)
        self.sequence = 0
        async for event in service.events(job, chat):
            self.sequence = event.sequence_number + 1
            out = event.event() if isinstance(event, TextDeltaOut) else event
            await self.send(out.to_json(), lane)
        self._keep(service, job, req.previous_response_id)

    async def _warm(self, service: SocketResponses, job: ResponseJob, lane: str | None) -> None:
        """Prefill the prompt (one token generated, dropped) and answer an empty response
        that the next turn continues: the warmed prefix is then a prefix-cache hit."""
        options = dataclasses.replace(job.chat.options, max_tokens=1)
        generation = await Generation.start(
            self.core.chat.engine, job.response.id, job.chat.prompt_token_ids, options
        )
        async for _ in generation:
            pass
        response = job.response
        await self.send(_lifecycle("response.created", 0, job), lane)
        response.status = "completed"
        response.completed_at = int(time.time())
        response.usage = response_usage(dataclasses.replace(generation.usage, completion_tokens=0))
        await self.send(_lifecycle("response.completed", 1, job), lane)
        self._keep(service, job, job.req.previous_response_id)

    def _keep(self, service: SocketResponses, job: ResponseJob, previous: str | None) -> None:
        response = job.response
        if response.status in _FAILED:
            if previous is not None:
                self.chain.forget(previous)
            return
        self.chain.keep(response.id, [*service.earlier, *job.inputs, *response.output])


def _lifecycle(kind: str, sequence_number: int, job: ResponseJob) -> bytes:
    event = ResponseLifecycleEvent.model_validate(
        {"type": kind, "sequence_number": sequence_number, "response": job.response}
    )
    return event.to_json()


def _event(text: str) -> dict[str, Any]:
    """The client event's envelope: a `response.create` that the socket can serve."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise InvalidRequestError(
            "The message is not valid JSON: each client event is one JSON object.",
            code="invalid_json",
        ) from None
    if not isinstance(doc, dict) or doc.get("type") != "response.create":
        kind = doc.get("type") if isinstance(doc, dict) else None
        raise InvalidRequestError(
            f"Unsupported client event type {kind!r}: this socket takes 'response.create'.",
            param="type",
            code="invalid_event_type",
        )
    if doc.get("background") is True:
        raise InvalidRequestError(
            "'background' is not supported over WebSocket: a socket's responses stream.",
            param="background",
        )
    return doc


def router(
    core: ServerState, store: StoreService | None, take_request: TakeRequest | None = None
) -> APIRouter:
    """The socket's route, on the core's chat service and the store (None: no store);
    each turn after the first counted by `take_request` (None: no request limit)."""
    router = APIRouter()
    limit = core.settings.max_request_bytes
    lifetime = core.settings.responses_ws_max_lifetime

    @router.websocket("/v1/responses")
    async def responses_socket(websocket: WebSocket) -> None:
        await websocket.accept()
        socket = ResponseSocket(websocket, core, store, take_request)
        pending: asyncio.Queue[str | None] = asyncio.Queue()
        reader = asyncio.create_task(_read(websocket, pending, limit))
        loop = asyncio.get_running_loop()
        ends = loop.time() + lifetime
        try:
            while True:
                try:
                    if loop.time() >= ends:  # events queued past the end are not served
                        raise TimeoutError
                    async with asyncio.timeout_at(ends):
                        text = await pending.get()
                except TimeoutError:
                    await _expire(websocket, lifetime)
                    return
                if text is None:
                    return
                turn = asyncio.create_task(socket.turn(text))
                # A socket that closes mid-answer cancels its turn: the engine request aborts.
                done, _ = await asyncio.wait({turn, reader}, return_when=asyncio.FIRST_COMPLETED)
                if turn not in done:
                    turn.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await turn
                    return
                if turn.exception() is not None:
                    return  # only a failed send leaves a turn: the socket is gone
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    return router


async def _expire(websocket: WebSocket, lifetime: float) -> None:
    """Tell the client its socket is past its lifetime, and close it (a client such as
    Codex then reconnects, sending its whole input again)."""
    error = InvalidRequestError(
        f"Responses WebSocket connection limit reached ({lifetime:g} s): open a new "
        "connection to continue, sending the whole input again.",
        code="websocket_connection_limit_reached",
    )
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.send_text(json.dumps(ws_error(error)))
        await websocket.close(NORMAL_CLOSURE, "connection limit reached")


async def _read(websocket: WebSocket, pending: asyncio.Queue[str | None], limit: int) -> None:
    """Queue each client event until the socket closes (then None, and return)."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode(errors="replace")
            if len(text) > limit:
                with contextlib.suppress(RuntimeError):
                    await websocket.close(MESSAGE_TOO_BIG, "message too big")
                return
            pending.put_nowait(text)
    finally:
        pending.put_nowait(None)
