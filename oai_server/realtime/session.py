"""One Realtime session: its settings, its conversation, and at most one response at a time.

Every client event gets its answer here; bad input (malformed JSON, an unknown event,
an invalid parameter, a second `response.create`) gets one `error` event carrying the
offending `event_id`, and the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from oai_server.error_responses import to_openai_error
from oai_server.errors import (
    ContextLengthExceededError,
    InvalidRequestError,
    UnsupportedParameterError,
)
from oai_server.ids import new_id
from oai_server.items.context import to_messages
from oai_server.items.tools import ChatTools, NamedTool, ToolDefinition, chat_tools
from oai_server.realtime.conversation import Conversation, check_text_only
from oai_server.realtime.responder import Outcome, Responder, event_id
from oai_server.services.chat import ChatJob, ChatService
from oai_server.services.common import check_model
from schemas.chat import CreateChatCompletionRequest
from schemas.realtime import (
    AudioBufferEvent,
    ClientEvent,
    ErrorDetail,
    ErrorEvent,
    FunctionTool,
    ItemCreate,
    ItemDelete,
    ItemDeleted,
    ItemEvent,
    ItemRetrieve,
    ItemRetrieved,
    ItemTruncate,
    ItemTruncated,
    MaxOutputTokens,
    MessageItem,
    ResponseCancel,
    ResponseCreate,
    ResponseParams,
    RetentionRatio,
    ServerEvent,
    Session,
    SessionConfig,
    SessionEvent,
    SessionUpdate,
    ToolChoice,
    ToolChoiceFunction,
    Truncation,
)

logger = logging.getLogger(__name__)

Send = Callable[[ServerEvent], Awaitable[None]]
_client_event: TypeAdapter[ClientEvent] = TypeAdapter(ClientEvent)
_TEXT_ONLY = "This server does text only: audio input and output are not supported."


class RealtimeSession:
    """The state of one connection, and a handler for each client event."""

    def __init__(
        self,
        chat: ChatService,
        send: Send,
        model: str | None = None,
        cache_salt: str | None = None,
        settle: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.chat = chat
        self.send = send
        # Gives back the tokens a finished response reserved but did not generate, so a
        # long session holds only what its running response may still use.
        self.settle = settle
        # The model the session answers with: the base model, or one of its adapters.
        self.model = model or chat.model_name
        # The API key's prefix-cache salt (oai_server/auth/salt.py), for every response.
        self.cache_salt = cache_salt
        self.id = new_id("sess")
        self.conversation = Conversation()
        self.instructions = ""
        self.max_output_tokens: MaxOutputTokens = "inf"
        self.tools: list[FunctionTool] = []
        self.tool_choice: ToolChoice = "auto"
        self.truncation: Truncation = "auto"
        self._active: tuple[Responder, asyncio.Task[None]] | None = None

    def session(self) -> Session:
        return Session(
            id=self.id,
            model=self.model,
            output_modalities=["text"],
            instructions=self.instructions,
            tools=self.tools,
            tool_choice=self.tool_choice,
            max_output_tokens=self.max_output_tokens,
            truncation=self.truncation,
        )

    async def start(self) -> None:
        await self.send(
            SessionEvent(event_id=event_id(), type="session.created", session=self.session())
        )

    async def handle(self, raw: str) -> None:
        """Answer one client message; never raises for anything the client sent."""
        sent_id: str | None = None
        try:
            try:
                document = json.loads(raw)
            except ValueError:
                raise InvalidRequestError(
                    "The message is not valid JSON.", code="invalid_json"
                ) from None
            if isinstance(document, dict) and isinstance(document.get("event_id"), str):
                sent_id = document["event_id"]
            await self._dispatch(_parse(document))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error event
            await self.error(exc, sent_id)

    async def error(self, exc: BaseException, sent_id: str | None) -> None:
        failure = to_openai_error(exc)
        await self.send(
            ErrorEvent(
                event_id=event_id(),
                error=ErrorDetail(
                    type=failure.type,
                    code=failure.code,
                    message=failure.message,
                    param=failure.param,
                    event_id=sent_id,
                ),
            )
        )

    async def close(self) -> None:
        """The connection is gone: stop whatever is generating (aborting the engine)."""
        if self._active is not None:
            task = self._active[1]
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _dispatch(self, event: ClientEvent) -> None:
        if isinstance(event, SessionUpdate):
            await self._update(event.session)
        elif isinstance(event, ItemCreate):
            await self._create_item(event)
        elif isinstance(event, ItemDelete):
            self.conversation.delete(event.item_id)
            await self.send(ItemDeleted(event_id=event_id(), item_id=event.item_id))
        elif isinstance(event, ItemRetrieve):
            item = self.conversation.get(event.item_id)
            await self.send(ItemRetrieved(event_id=event_id(), item=item))
        elif isinstance(event, ItemTruncate):
            await self._truncate(event)
        elif isinstance(event, ResponseCreate):
            await self._respond(event.response or ResponseParams())
        elif isinstance(event, ResponseCancel):
            await self._cancel(event)
        elif isinstance(event, AudioBufferEvent):
            raise UnsupportedParameterError(_TEXT_ONLY, param="type")

    async def _update(self, config: SessionConfig) -> None:
        if config.model is not None:
            check_model(
                config.model, self.chat.model_name, param="session.model", models=self.chat.models
            )
            self.model = config.model
        if config.instructions is not None:
            self.instructions = config.instructions
        if config.max_output_tokens is not None:
            self.max_output_tokens = config.max_output_tokens
        if config.tools is not None:
            self.tools = config.tools
        if config.tool_choice is not None:
            self.tool_choice = config.tool_choice
        if config.truncation is not None:
            self.truncation = config.truncation
        await self.send(
            SessionEvent(event_id=event_id(), type="session.updated", session=self.session())
        )
        # The text settings above still apply: the session goes on, in text.
        if config.audio is not None:
            raise UnsupportedParameterError(_TEXT_ONLY, param="session.audio")
        if config.output_modalities and "audio" in config.output_modalities:
            raise UnsupportedParameterError(_TEXT_ONLY, param="session.output_modalities")

    async def _create_item(self, event: ItemCreate) -> None:
        item = event.item
        check_text_only(item)
        if item.id is None:
            item.id = new_id("item")
        elif any(item.id == i.id for i in self.conversation.items()):
            raise InvalidRequestError(f"Item '{item.id}' already exists.", param="item.id")
        item.status = "completed"
        previous = self.conversation.add(item, event.previous_item_id)
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.send(
                ItemEvent(event_id=event_id(), type=kind, item=item, previous_item_id=previous)
            )

    async def _truncate(self, event: ItemTruncate) -> None:
        item = self.conversation.get(event.item_id)
        if not isinstance(item, MessageItem) or item.role != "assistant":
            raise InvalidRequestError("Only assistant messages can be truncated.", param="item_id")
        if event.content_index >= len(item.content):
            raise InvalidRequestError("No such content part.", param="content_index")
        if event.audio_end_ms > 0:
            # Truncation cuts an item's audio; a text item has none to cut.
            raise InvalidRequestError(
                "audio_end_ms is beyond the item's audio: text items have none.",
                param="audio_end_ms",
            )
        await self.send(
            ItemTruncated(
                event_id=event_id(),
                item_id=event.item_id,
                content_index=event.content_index,
                audio_end_ms=0,
            )
        )

    async def _respond(self, params: ResponseParams) -> None:
        if self._active is not None:
            raise InvalidRequestError(
                "Conversation already has an active response in progress: "
                f"{self._active[0].response_id}. Wait until it is done, or cancel it.",
                code="conversation_already_has_active_response",
            )
        if params.audio is not None or (
            params.output_modalities and "audio" in params.output_modalities
        ):
            raise UnsupportedParameterError(_TEXT_ONLY, param="response.output_modalities")
        conversation = self.conversation
        if params.input is not None:
            # Out of band: this response sees only the given items.
            conversation = Conversation()
            for i, item in enumerate(params.input):
                check_text_only(item, f"response.input[{i}]")
                conversation.add(item)
        elif params.conversation == "none":
            conversation = Conversation()
        job = await self._prepare(params, conversation)
        # `conversation: "none"` keeps the output out of every conversation; otherwise it
        # joins the session's, even when `input` gave the response a context of its own.
        keep = None if params.conversation == "none" else self.conversation
        responder = Responder(
            new_id("resp"),
            keep,
            self.send,
            params.max_output_tokens or self.max_output_tokens,
            params.metadata,
        )
        await responder.created()
        task = asyncio.create_task(self._run(responder, job))
        self._active = (responder, task)

    async def _run(self, responder: Responder, job: ChatJob) -> None:
        outcome: Outcome = "completed"
        error: Exception | None = None
        try:
            chat = await self.chat.start(job, request_id=responder.response_id)
            await responder.run(self.chat, chat)
        except asyncio.CancelledError:
            # `response.cancel`, or the socket closed: the engine request is aborted.
            outcome = "cancelled"
        except Exception as exc:  # noqa: BLE001 - the client hears of it in response.done
            logger.warning("realtime response %s failed: %r", responder.response_id, exc)
            outcome, error = "failed", exc
        try:
            with contextlib.suppress(Exception):
                if outcome != "completed":
                    await responder.finish_items("incomplete")
                if self.settle is not None:
                    # Before response.done, so a client that reads its limits then sees them.
                    await self.settle()
                await responder.done(outcome, error)
        finally:
            self._active = None

    async def _cancel(self, event: ResponseCancel) -> None:
        active = self._active
        if active is None or (event.response_id and event.response_id != active[0].response_id):
            raise InvalidRequestError(
                "Cancellation failed: no active response found.",
                param="response_id",
                code="response_cancel_not_active",
            )
        active[1].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await active[1]

    async def _prepare(self, params: ResponseParams, conversation: Conversation) -> ChatJob:
        """The chat job for the next response; drops the oldest items while it cannot fit
        (as the session's `truncation` says), telling the client of each."""
        target: float | None = None
        while True:
            request = self._request(params, conversation)
            try:
                job = await self.chat.prepare(request)
            except ContextLengthExceededError:
                if self.truncation == "disabled" or not await self._make_room(conversation):
                    raise
                if isinstance(self.truncation, RetentionRatio):
                    limit = self.chat.context_length(self.model)
                    target = self.truncation.retention_ratio * limit
                continue
            if (
                target is not None
                and len(job.prompt_token_ids) > target
                and await self._make_room(conversation)
            ):
                continue
            return job

    async def _make_room(self, conversation: Conversation) -> bool:
        """Drop the oldest items; False when none may go."""
        dropped = conversation.make_room()
        for item in dropped:
            if item.id is not None and conversation is self.conversation:
                await self.send(ItemDeleted(event_id=event_id(), item_id=item.id))
        return bool(dropped)

    def _request(
        self, params: ResponseParams, conversation: Conversation
    ) -> CreateChatCompletionRequest:
        instructions = self.instructions if params.instructions is None else params.instructions
        tools = self.tools if params.tools is None else params.tools
        choice = self.tool_choice if params.tool_choice is None else params.tool_choice
        limit = params.max_output_tokens or self.max_output_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_messages(instructions, conversation.context())
            or [{"role": "user", "content": ""}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": None if limit == "inf" else limit,
            "cache_salt": self.cache_salt,
        }
        body["tools"], body["tool_choice"] = _tools(tools, choice)
        return CreateChatCompletionRequest.model_validate(body)


def _tools(tools: Sequence[FunctionTool], choice: ToolChoice) -> ChatTools:
    """The session's function tools and `tool_choice` as the chat request's; without
    tools, no choice either."""
    offered = [ToolDefinition(t.name, t.description, t.parameters) for t in tools]
    named = NamedTool(choice.name) if isinstance(choice, ToolChoiceFunction) else choice
    return chat_tools(offered, named if offered else None)


def _parse(document: object) -> ClientEvent:
    """The client event in `document`; an unknown type is said as such."""
    if isinstance(document, dict):
        kind = document.get("type")
        try:
            return _client_event.validate_python(document)
        except ValidationError as exc:
            if any(e["type"] == "union_tag_invalid" for e in exc.errors()):
                raise InvalidRequestError(
                    f"Invalid value: '{kind}'. This server supports the Realtime API's text "
                    "events (session.update, conversation.item.*, response.create, "
                    "response.cancel).",
                    param="type",
                    code="invalid_value",
                ) from None
            raise
    raise InvalidRequestError("An event must be a JSON object with a 'type'.", param="type")
