"""Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`) on the wire.

The `anthropic` SDK's request and response types are the reference for every field.
Request models ignore unknown fields, as Anthropic does; `cache_control` is accepted on
any block and changes nothing (the engine's prefix cache needs no marking).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from schemas.common import INT32_MAX, RequestModel, ResponseModel

# --- requests ---------------------------------------------------------------

CacheControl = dict[str, Any] | None


class TextBlockParam(RequestModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControl = None


class ImageBlockParam(RequestModel):
    type: Literal["image"]
    source: dict[str, Any]
    cache_control: CacheControl = None


class DocumentBlockParam(RequestModel):
    type: Literal["document"]
    source: dict[str, Any]
    title: str | None = None
    context: str | None = None
    cache_control: CacheControl = None


class SearchResultBlockParam(RequestModel):
    """A search's result, given to the model with its source and title."""

    type: Literal["search_result"]
    source: str
    title: str
    content: list[TextBlockParam]
    cache_control: CacheControl = None


class ToolUseBlockParam(RequestModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl = None


ToolResultPart = Annotated[
    TextBlockParam | ImageBlockParam | DocumentBlockParam | SearchResultBlockParam,
    Field(discriminator="type"),
]


class ToolResultBlockParam(RequestModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[ToolResultPart] | None = None
    is_error: bool | None = None
    cache_control: CacheControl = None


class ThinkingBlockParam(RequestModel):
    """The model's thinking in an earlier turn, sent back as the SDKs do."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlockParam(RequestModel):
    type: Literal["redacted_thinking"]
    data: str


ContentBlockParam = Annotated[
    TextBlockParam
    | ImageBlockParam
    | DocumentBlockParam
    | SearchResultBlockParam
    | ToolUseBlockParam
    | ToolResultBlockParam
    | ThinkingBlockParam
    | RedactedThinkingBlockParam,
    Field(discriminator="type"),
]


class MessageParam(RequestModel):
    # `system`: instructions given mid-conversation (Claude Code 2.1 sends its environment
    # so), shown to the model where they stand.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlockParam]
    # A system message's lifetime: "next_user_message" shows it only until a later user turn.
    clear_at: Literal["next_user_message", "never"] | None = None


class Tool(RequestModel):
    """A client tool (`input_schema` required), or one of Anthropic's own tools (a `type`
    such as `web_search_20250305` or `bash_20250124`), which carry none."""

    name: str
    input_schema: dict[str, Any] | None = None
    description: str | None = None
    type: str | None = None
    cache_control: CacheControl = None


class ToolChoiceAuto(RequestModel):
    type: Literal["auto"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(RequestModel):
    type: Literal["any"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceTool(RequestModel):
    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: bool | None = None


class ToolChoiceNone(RequestModel):
    type: Literal["none"]


ToolChoice = Annotated[
    ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone,
    Field(discriminator="type"),
]


# How thinking shows in the answer; accepted, and the thinking is always returned (as
# `vllm serve`): held back, it would be lost from the next turn's prompt.
ThinkingDisplay = Literal["summarized", "omitted", "updates"] | None


class ThinkingEnabled(RequestModel):
    type: Literal["enabled"]
    budget_tokens: Annotated[int, Field(ge=1024, le=INT32_MAX)]
    display: ThinkingDisplay = None


class ThinkingDisabled(RequestModel):
    type: Literal["disabled"]


class ThinkingAdaptive(RequestModel):
    type: Literal["adaptive"]
    display: ThinkingDisplay = None


class ThinkingBetweenTools(RequestModel):
    type: Literal["between_tools"]


Thinking = Annotated[
    ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive | ThinkingBetweenTools,
    Field(discriminator="type"),
]


class RequestMetadata(RequestModel):
    user_id: Annotated[str, Field(max_length=256)] | None = None


class JSONOutputFormat(RequestModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(RequestModel):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JSONOutputFormat | None = None


class ThinkingTurns(RequestModel):
    type: Literal["thinking_turns"]
    value: Annotated[int, Field(ge=0, le=INT32_MAX)]


class AllThinkingTurns(RequestModel):
    type: Literal["all"]


class ClearThinkingEdit(RequestModel):
    """Drop the thinking of all but the last `keep` assistant turns (default: the last one)."""

    type: Literal["clear_thinking_20251015"]
    keep: (
        Annotated[ThinkingTurns | AllThinkingTurns, Field(discriminator="type")]
        | Literal["all"]
        | None
    ) = None


class ClearToolUsesEdit(RequestModel):
    """Clear old tool results past a threshold; accepted, not done (its fields ignored)."""

    type: Literal["clear_tool_uses_20250919"]


class CompactEdit(RequestModel):
    """Summarise old context past a threshold; accepted, not done (its fields ignored)."""

    type: Literal["compact_20260112"]


ContextEdit = Annotated[
    ClearThinkingEdit | ClearToolUsesEdit | CompactEdit, Field(discriminator="type")
]


class ContextManagement(RequestModel):
    edits: list[ContextEdit] | None = None


class Thread(RequestModel):
    """Server-held conversation state: `create` is accepted (nothing is held), `continue`
    refused (the earlier turns are not here)."""

    type: Literal["create", "continue"]
    previous_message_id: str | None = None


System = str | list[TextBlockParam] | None


class CountTokensRequest(RequestModel):
    """`POST /v1/messages/count_tokens`: what of a message request makes its prompt."""

    model: str
    messages: list[MessageParam]
    system: System = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    # The structured-outputs beta's name for `output_config.format`.
    output_format: JSONOutputFormat | None = None
    context_management: ContextManagement | None = None


class MessagesRequest(CountTokensRequest):
    """`POST /v1/messages`."""

    max_tokens: Annotated[int, Field(ge=0, le=INT32_MAX)]
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
    metadata: RequestMetadata | None = None
    service_tier: Literal["auto", "standard_only"] | None = None
    # Asks for a summary of `messages` in place of an answer: refused, not answered.
    compaction: dict[str, Any] | None = None
    thread: Thread | None = None


# --- responses --------------------------------------------------------------

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class TextBlock(ResponseModel):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(ResponseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ThinkingBlock(ResponseModel):
    """The model's thinking, before its answer (a model served with a reasoning parser)."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


ContentBlock = TextBlock | ToolUseBlock | ThinkingBlock


class Usage(ResponseModel):
    """`input_tokens` are those the prefix cache did not hold, as Anthropic counts them:
    the prompt is `input_tokens + cache_read_input_tokens`."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None
    cache_read_input_tokens: int | None
    service_tier: Literal["standard"] = "standard"


class Message(ResponseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: list[ContentBlock]
    model: str
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: Usage


class CountTokensResponse(ResponseModel):
    input_tokens: int


# --- stream events ----------------------------------------------------------


class MessageStartEvent(ResponseModel):
    type: Literal["message_start"] = "message_start"
    message: Message


class ContentBlockStartEvent(ResponseModel):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ContentBlock


class TextDelta(ResponseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJSONDelta(ResponseModel):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ThinkingDelta(ResponseModel):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class SignatureDelta(ResponseModel):
    """A thinking block's signature, sent just before the block stops."""

    type: Literal["signature_delta"] = "signature_delta"
    signature: str


class ContentBlockDeltaEvent(ResponseModel):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta


class ContentBlockStopEvent(ResponseModel):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDelta(ResponseModel):
    stop_reason: StopReason | None
    stop_sequence: str | None


class MessageDeltaUsage(ResponseModel):
    """The counts at the end: output so far, and the input's again (as Anthropic sends)."""

    output_tokens: int
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class MessageDeltaEvent(ResponseModel):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDelta
    usage: MessageDeltaUsage


class MessageStopEvent(ResponseModel):
    type: Literal["message_stop"] = "message_stop"


class PingEvent(ResponseModel):
    type: Literal["ping"] = "ping"


class ErrorDetail(ResponseModel):
    type: str
    message: str


class ErrorResponse(ResponseModel):
    """The error body, and the `error` event of a stream that failed after it started."""

    type: Literal["error"] = "error"
    error: ErrorDetail


StreamEvent = (
    MessageStartEvent
    | ContentBlockStartEvent
    | ContentBlockDeltaEvent
    | ContentBlockStopEvent
    | MessageDeltaEvent
    | MessageStopEvent
    | PingEvent
    | ErrorResponse
)


# --- models -----------------------------------------------------------------


class ModelInfo(ResponseModel):
    type: Literal["model"] = "model"
    id: str
    display_name: str
    created_at: str  # RFC 3339


class ModelList(ResponseModel):
    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None
