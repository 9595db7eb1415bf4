"""`/v1/responses`: the request, the response object and its items, as OpenAI's spec has them.

Items come in two shapes. What a client sends (`InputItem`: an easy message with a
string, a typed message, a `function_call`, a `function_call_output`, ...) is parsed
leniently enough to say precisely what this server cannot take. What the server
sends and stores (`Item`: a message, function call, function call output or reasoning, each
with an id and a status) is `schemas.response_items`: the one shape of items in responses,
in their input item lists and in conversations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag

from schemas.common import (
    CacheSalt,
    Metadata,
    Penalty,
    RequestModel,
    ResponseModel,
    ServiceTier,
    Temperature,
    TokenCount,
    TopP,
    by_type,
)
from schemas.response_items import Item, ItemStatus, MessagePhase

# --- what a client sends --------------------------------------------------------


def _type_tag(known: frozenset[str] | Mapping[str, str], default: str | None = None) -> Any:
    """A discriminator on `type` that sends unknown types to an `other` variant; `known`
    may map a type to its tag (a class name: an error's location then names fields only)."""
    tags = known if isinstance(known, Mapping) else {kind: kind for kind in known}

    def tag(value: Any) -> str:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if kind is None and default is not None:
            return default
        return tags.get(kind, "other") if isinstance(kind, str) else "other"

    return Discriminator(tag)


class InputTextPart(RequestModel):
    """Text in a message: `input_text` (user turns) or `output_text` (earlier assistant turns)."""

    type: Literal["input_text", "output_text", "text"]
    text: str


class InputImagePart(RequestModel):
    """An image: by URL (`data:` or `http(s)`) or by a file uploaded to `/v1/files`."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high"] | None = None


class OtherPart(RequestModel):
    """A file, audio or refusal part: parsed so the server can say it can't take it."""

    type: str


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if kind in ("input_text", "output_text", "text"):
        return "text"
    return "image" if kind == "input_image" else "other"


InputPart = Annotated[
    Annotated[InputTextPart, Tag("text")]
    | Annotated[InputImagePart, Tag("image")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]


class InputMessage(RequestModel):
    type: Literal["message"] | None = None
    id: str | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputPart]
    status: ItemStatus | None = None
    phase: MessagePhase | None = None


class FunctionCallInput(RequestModel):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None
    status: ItemStatus | None = None


class CustomToolCallInput(RequestModel):
    type: Literal["custom_tool_call"]
    id: str | None = None
    call_id: str
    name: str
    input: str
    namespace: str | None = None


class CustomToolCallOutputInput(RequestModel):
    type: Literal["custom_tool_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputPart]


class FunctionCallOutputInput(RequestModel):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputPart]
    status: ItemStatus | None = None


class ReasoningTextInput(RequestModel):
    type: Literal["reasoning_text", "summary_text"]
    text: str


class ReasoningInput(RequestModel):
    """An earlier turn's reasoning item, sent back as OpenAI asks clients to."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[ReasoningTextInput] = Field(default_factory=list)
    content: list[ReasoningTextInput] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class CompactionInput(RequestModel):
    """A compaction item sent back as `/v1/responses/compact` returned it."""

    type: Literal["compaction"]
    id: str | None = None
    encrypted_content: str


class OtherItem(RequestModel):
    """An item reference, a built-in tool's call...: refused by name."""

    type: str


_ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "compaction",
    }
)

InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FunctionCallInput, Tag("function_call")]
    | Annotated[FunctionCallOutputInput, Tag("function_call_output")]
    | Annotated[CustomToolCallInput, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutputInput, Tag("custom_tool_call_output")]
    | Annotated[ReasoningInput, Tag("reasoning")]
    | Annotated[CompactionInput, Tag("compaction")]
    | Annotated[OtherItem, Tag("other")],
    _type_tag(_ITEM_TYPES, "message"),
]


class FunctionTool(RequestModel):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextInputFormat(RequestModel):
    """Unconstrained free-form text."""

    type: Literal["text"]


class GrammarInputFormat(RequestModel):
    """A custom tool's input constrained by a Lark grammar or a regular expression."""

    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str


class CustomTool(RequestModel):
    """A tool whose input is free text, optionally in a grammar's language."""

    type: Literal["custom"]
    name: str
    description: str | None = None
    format: (
        Annotated[
            Annotated[TextInputFormat, Tag("TextInputFormat")]
            | Annotated[GrammarInputFormat, Tag("GrammarInputFormat")],
            by_type({"text": "TextInputFormat", "grammar": "GrammarInputFormat"}),
        ]
        | None
    ) = None


class NamespaceTool(RequestModel):
    """Function and custom tools grouped under a name (their calls carry `namespace`)."""

    type: Literal["namespace"]
    name: str
    description: str
    tools: list[
        Annotated[
            Annotated[FunctionTool, Tag("FunctionTool")] | Annotated[CustomTool, Tag("CustomTool")],
            by_type({"function": "FunctionTool", "custom": "CustomTool"}),
        ]
    ]


class OtherTool(RequestModel):
    """A hosted tool (web search, file search, MCP, ...): kept as sent, for the echo."""

    model_config = ConfigDict(extra="allow")

    type: str


Tool = Annotated[
    Annotated[FunctionTool, Tag("FunctionTool")]
    | Annotated[CustomTool, Tag("CustomTool")]
    | Annotated[NamespaceTool, Tag("NamespaceTool")]
    | Annotated[OtherTool, Tag("other")],
    _type_tag({"function": "FunctionTool", "custom": "CustomTool", "namespace": "NamespaceTool"}),
]


class ToolChoiceFunction(RequestModel):
    type: Literal["function"]
    name: str


class ToolChoiceCustom(RequestModel):
    type: Literal["custom"]
    name: str


class ToolChoiceAllowed(RequestModel):
    """Only these tools are offered (`{"type": "function", "name": ...}`, ...);
    `required`: one of them must be called."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]]


class OtherToolChoice(RequestModel):
    """A hosted tool forced (`web_search_preview`, `mcp`, ...): kept as sent, for the echo."""

    model_config = ConfigDict(extra="allow")

    type: str


ToolChoice = (
    Literal["none", "auto", "required"]
    | Annotated[
        Annotated[ToolChoiceFunction, Tag("ToolChoiceFunction")]
        | Annotated[ToolChoiceCustom, Tag("ToolChoiceCustom")]
        | Annotated[ToolChoiceAllowed, Tag("ToolChoiceAllowed")]
        | Annotated[OtherToolChoice, Tag("other")],
        _type_tag(
            {
                "function": "ToolChoiceFunction",
                "custom": "ToolChoiceCustom",
                "allowed_tools": "ToolChoiceAllowed",
            }
        ),
    ]
)


class TextFormat(RequestModel):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(RequestModel):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


SummaryKind = Literal["auto", "concise", "detailed"]


class ReasoningConfig(RequestModel):
    """`reasoning`: how hard the model thinks, and what a client would like shown of it."""

    effort: str | None = None
    summary: SummaryKind | None = None
    generate_summary: SummaryKind | None = None  # the deprecated name of `summary`
    mode: str | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None


class ConversationRef(RequestModel):
    id: str


class ContextManagement(RequestModel):
    """`context_management`: `compaction` compacts the context before the turn when its
    input passes `compact_threshold` tokens; other types are accepted and ignored."""

    type: str
    compact_threshold: Annotated[int, Field(ge=1)] | None = None


class CreateResponse(RequestModel):
    model: str
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    max_output_tokens: TokenCount = None
    temperature: Temperature = None
    top_p: TopP = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    metadata: Metadata = None
    store: bool | None = True
    stream: bool | None = False
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    background: bool | None = None
    reasoning: ReasoningConfig | None = None
    prompt: dict[str, Any] | None = None
    max_tool_calls: int | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    # OpenAI's `ServiceTierResponses`: the chat tiers and `ultrafast` (served as default).
    service_tier: ServiceTier | Literal["ultrafast"] | None = None
    user: str | None = None
    safety_identifier: Annotated[str, Field(max_length=64)] | None = None
    prompt_cache_key: Annotated[str, Field(max_length=64)] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None
    context_management: list[ContextManagement] | None = None
    stream_options: dict[str, Any] | None = None
    # Open Responses' sampling penalties, as chat completions take them.
    presence_penalty: Penalty = None
    frequency_penalty: Penalty = None
    cache_salt: CacheSalt | None = None  # vLLM's extension, as on chat completions


class InputTokensRequest(RequestModel):
    """`POST /v1/responses/input_tokens`: what `CreateResponse` would send to the model."""

    model: str
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    previous_response_id: str | None = None
    conversation: str | ConversationRef | None = None
    reasoning: ReasoningConfig | None = None
    truncation: Literal["auto", "disabled"] | None = None


class CompactRequest(RequestModel):
    """`POST /v1/responses/compact`: the history to compact, as `CreateResponse` gives it."""

    model: str
    input: str | list[InputItem] | None = None
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: Annotated[str, Field(max_length=64)] | None = None


# --- what the server sends and stores ----------------------------------------------


class InputTokensDetails(ResponseModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(ResponseModel):
    reasoning_tokens: int = 0


class ResponseUsage(ResponseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails = Field(default_factory=InputTokensDetails)
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class ResponseError(ResponseModel):
    code: str
    message: str


class IncompleteDetails(ResponseModel):
    reason: Literal["max_output_tokens", "content_filter"]


class ConversationId(ResponseModel):
    id: str


ResponseStatus = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]


class Response(ResponseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: ResponseStatus
    completed_at: int | None
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | None
    max_output_tokens: int | None
    model: str
    output: list[Item]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, Any] | None
    store: bool
    background: bool
    temperature: float
    top_p: float
    text: dict[str, Any]
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    truncation: Literal["auto", "disabled"]
    usage: ResponseUsage | None = None
    metadata: dict[str, str]
    conversation: ConversationId | None
    service_tier: str = "default"
    user: str | None = None
    # Sent as null where the request did not set them (`prepare` sets each, None included);
    # optional so that responses stored before they were echoed still read back.
    top_logprobs: int | None = None
    max_tool_calls: int | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None


class ResponseItemList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str
    last_id: str
    has_more: bool


class ResponseDeleted(ResponseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool


class InputTokens(ResponseModel):
    object: Literal["response.input_tokens"] = "response.input_tokens"
    input_tokens: int


class CompactedResponse(ResponseModel):
    """What `POST /v1/responses/compact` returns: the history's user messages and one
    compaction item standing for the rest; `usage` is the summarising pass's."""

    id: str
    object: Literal["response.compaction"] = "response.compaction"
    created_at: int
    output: list[Item]
    usage: ResponseUsage
