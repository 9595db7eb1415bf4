"""`WS /v1/realtime`: the socket, its limits, and the session that answers it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from oai_server.caller import caller
from oai_server.errors import InvalidRequestError, OpenAIError
from oai_server.generation.salt import salt_for
from oai_server.models import ModelRegistry
from oai_server.observability.context import RequestRecord, current_request
from oai_server.realtime.session import RealtimeSession
from oai_server.services.chat import ChatService
from oai_server.services.common import check_model
from oai_server.settings import Settings
from schemas.realtime import ServerEvent

logger = logging.getLogger(__name__)
# Gives back the tokens a session reserved but did not use (the rate limits'), at its end.
Settle = Callable[[RequestRecord], Awaitable[None]]

# RFC 6455 close codes.
NORMAL_CLOSURE = 1000
POLICY_VIOLATION = 1008
MESSAGE_TOO_BIG = 1009
# The subprotocol OpenAI's clients offer; a browser adds the key as a second one.
SUBPROTOCOL = "realtime"


def router(
    chat: ChatService, models: ModelRegistry, settings: Settings, settle_with: Settle | None
) -> APIRouter:
    """The socket's route: its sessions answered by `chat`, naming one of `models`, under
    `settings`' limits; `settle_with` (None: no token limit) settles a session's tokens."""
    router = APIRouter()

    @router.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket) -> None:
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        lock = asyncio.Lock()

        async def send(event: ServerEvent) -> None:
            if websocket.application_state is not WebSocketState.CONNECTED:
                return
            async with lock:
                await websocket.send_text(event.to_json().decode())

        salt = salt_for(caller(websocket.scope), None, shared=settings.prefix_cache_shared)
        model = websocket.query_params.get("model")
        record = current_request.get()
        settle = None
        if settle_with is not None and record is not None:
            settle = functools.partial(settle_with, record)
        session = RealtimeSession(chat, send, model, salt, settle)
        try:
            if model is not None:
                check_model(model, chat.model_name, models=models)
        except OpenAIError as exc:
            await session.error(exc, None)
            await websocket.close(POLICY_VIOLATION, "unknown model")
            return
        await session.start()
        try:
            await _serve(websocket, session, settings)
        except WebSocketDisconnect:
            pass
        finally:
            await session.close()

    return router


async def _serve(websocket: WebSocket, session: RealtimeSession, settings: Settings) -> None:
    limit = settings.max_request_bytes
    idle = settings.realtime_idle_timeout
    while True:
        try:
            message = await asyncio.wait_for(websocket.receive(), idle)
        except TimeoutError:
            await session.error(
                InvalidRequestError(
                    f"The session was idle for {idle:g} s and is closed.",
                    code="session_idle_timeout",
                ),
                None,
            )
            await websocket.close(NORMAL_CLOSURE, "idle timeout")
            return
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            data = message.get("bytes") or b""
            if len(data) > limit:
                await _too_big(websocket)
                return
            text = data.decode(errors="replace")
        elif len(text) > limit:
            await _too_big(websocket)
            return
        await session.handle(text)


async def _too_big(websocket: WebSocket) -> None:
    with contextlib.suppress(RuntimeError):
        await websocket.close(MESSAGE_TOO_BIG, "message too big")
