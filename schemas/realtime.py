"""OpenAI's Realtime API, its text subset: client events in, server events out.

The shapes follow the spec's `RealtimeClientEvent...`, `RealtimeServerEvent...`,
`RealtimeConversationItem...`, `RealtimeSessionCreateResponseGA` and `RealtimeResponse`
schemas. Audio and images are parsed only so the server can say it does text only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from schemas.common import Metadata, RequestModel, ResponseModel

ItemStatus = Literal["completed", "incomplete", "in_progress"]
MaxOutputTokens = Annotated[int, Field(ge=1)] | Literal["inf"]


class _Item(ResponseModel):
    """A conversation item: sent by the server, and also what a client creates."""

    # A client may send what the server sends back (`object`, `status`) or more.
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


class ContentPart(ResponseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["input_text", "input_audio", "input_image", "output_text", "output_audio"]
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None
    image_url: str | None = None


class MessageItem(_Item):
    type: Literal["message"]
    role: Literal["system", "user", "assistant"]
    content: list[ContentPart]


class FunctionCallItem(_Item):
    type: Literal["function_call"]
    call_id: str | None = None
    name: str
    arguments: str


class FunctionCallOutputItem(_Item):
    type: Literal["function_call_output"]
    call_id: str
    output: str


ConversationItem = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem, Field(discriminator="type")
]


class FunctionTool(ResponseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"] = "function"
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolChoiceFunction(RequestModel):
    type: Literal["function"]
    name: str


ToolChoice = Literal["none", "auto", "required"] | ToolChoiceFunction


class RetentionRatio(ResponseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["retention_ratio"]
    retention_ratio: Annotated[float, Field(ge=0, le=1)]


Truncation = Literal["auto", "disabled"] | RetentionRatio


# --- client events ---------------------------------------------------------------


class SessionConfig(RequestModel):
    """What `session.update` may set; audio is parsed to be refused."""

    type: Literal["realtime"] | None = None
    model: str | None = None
    instructions: str | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    max_output_tokens: MaxOutputTokens | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: ToolChoice | None = None
    truncation: Truncation | None = None
    audio: dict[str, Any] | None = None


class ResponseParams(RequestModel):
    """What `response.create` may set for one response, over the session's settings."""

    instructions: str | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    max_output_tokens: MaxOutputTokens | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: ToolChoice | None = None
    metadata: Metadata = None
    conversation: str | None = None
    input: list[ConversationItem] | None = None
    audio: dict[str, Any] | None = None


class _ClientEvent(RequestModel):
    event_id: Annotated[str, Field(max_length=512)] | None = None


class SessionUpdate(_ClientEvent):
    type: Literal["session.update"]
    session: SessionConfig


class ItemCreate(_ClientEvent):
    type: Literal["conversation.item.create"]
    item: ConversationItem
    previous_item_id: str | None = None


class ItemDelete(_ClientEvent):
    type: Literal["conversation.item.delete"]
    item_id: str


class ItemRetrieve(_ClientEvent):
    type: Literal["conversation.item.retrieve"]
    item_id: str


class ItemTruncate(_ClientEvent):
    type: Literal["conversation.item.truncate"]
    item_id: str
    content_index: Annotated[int, Field(ge=0)]
    audio_end_ms: Annotated[int, Field(ge=0)]


class ResponseCreate(_ClientEvent):
    type: Literal["response.create"]
    response: ResponseParams | None = None


class ResponseCancel(_ClientEvent):
    type: Literal["response.cancel"]
    response_id: str | None = None


class AudioBufferEvent(_ClientEvent):
    """Any `input_audio_buffer.*` or `output_audio_buffer.*` event: refused, text only."""

    type: Literal[
        "input_audio_buffer.append",
        "input_audio_buffer.clear",
        "input_audio_buffer.commit",
        "output_audio_buffer.clear",
    ]


ClientEvent = Annotated[
    SessionUpdate
    | ItemCreate
    | ItemDelete
    | ItemRetrieve
    | ItemTruncate
    | ResponseCreate
    | ResponseCancel
    | AudioBufferEvent,
    Field(discriminator="type"),
]


# --- server events ---------------------------------------------------------------


class Session(ResponseModel):
    type: Literal["realtime"] = "realtime"
    object: Literal["realtime.session"] = "realtime.session"
    id: str
    model: str
    output_modalities: list[Literal["text", "audio"]]
    instructions: str
    tools: list[FunctionTool]
    tool_choice: ToolChoice
    max_output_tokens: MaxOutputTokens
    truncation: Truncation


class InputTokenDetails(ResponseModel):
    cached_tokens: int
    text_tokens: int
    audio_tokens: int = 0


class OutputTokenDetails(ResponseModel):
    text_tokens: int
    audio_tokens: int = 0


class Usage(ResponseModel):
    total_tokens: int
    input_tokens: int
    output_tokens: int
    input_token_details: InputTokenDetails
    output_token_details: OutputTokenDetails


class StatusError(ResponseModel):
    type: str
    code: str | None = None


class StatusDetails(ResponseModel):
    type: Literal["completed", "cancelled", "failed", "incomplete"]
    reason: Literal["turn_detected", "client_cancelled", "max_output_tokens"] | None = None
    error: StatusError | None = None


class Response(ResponseModel):
    object: Literal["realtime.response"] = "realtime.response"
    id: str
    status: Literal["completed", "cancelled", "failed", "incomplete", "in_progress"]
    status_details: StatusDetails | None = None
    output: list[MessageItem | FunctionCallItem]
    conversation_id: str | None = None
    output_modalities: list[Literal["text", "audio"]]
    max_output_tokens: MaxOutputTokens
    metadata: Metadata = None
    usage: Usage | None = None


class TextPart(ResponseModel):
    type: Literal["text"] = "text"
    text: str


class ErrorDetail(ResponseModel):
    type: str
    code: str | None
    message: str
    param: str | None
    event_id: str | None


class ServerEvent(ResponseModel):
    event_id: str
    type: str


class ErrorEvent(ServerEvent):
    type: Literal["error"] = "error"
    error: ErrorDetail


class SessionEvent(ServerEvent):
    type: Literal["session.created", "session.updated"]
    session: Session


class ItemEvent(ServerEvent):
    type: Literal["conversation.item.added", "conversation.item.done", "conversation.item.created"]
    item: MessageItem | FunctionCallItem | FunctionCallOutputItem
    previous_item_id: str | None = None


class ItemRetrieved(ServerEvent):
    type: Literal["conversation.item.retrieved"] = "conversation.item.retrieved"
    item: MessageItem | FunctionCallItem | FunctionCallOutputItem


class ItemDeleted(ServerEvent):
    type: Literal["conversation.item.deleted"] = "conversation.item.deleted"
    item_id: str


class ItemTruncated(ServerEvent):
    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    item_id: str
    content_index: int
    audio_end_ms: int


class ResponseEvent(ServerEvent):
    type: Literal["response.created", "response.done"]
    response: Response


class OutputItemEvent(ServerEvent):
    type: Literal["response.output_item.added", "response.output_item.done"]
    response_id: str
    output_index: int
    item: MessageItem | FunctionCallItem


class ContentPartEvent(ServerEvent):
    type: Literal["response.content_part.added", "response.content_part.done"]
    response_id: str
    item_id: str
    output_index: int
    content_index: int
    part: TextPart


class TextDeltaEvent(ServerEvent):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    response_id: str
    item_id: str
    output_index: int
    content_index: int
    delta: str


class TextDoneEvent(ServerEvent):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    response_id: str
    item_id: str
    output_index: int
    content_index: int
    text: str


class ArgumentsDeltaEvent(ServerEvent):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    delta: str


class ArgumentsDoneEvent(ServerEvent):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    name: str
    arguments: str
