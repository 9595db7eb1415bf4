"""`/v1/chat/completions`: requests, responses and stream chunks, as OpenAI's spec has them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, Tag

from schemas.common import (
    CompletionUsage,
    GenerationRequest,
    RequestModel,
    ResponseModel,
    TokenCount,
    by_type,
)


class TextContentPart(RequestModel):
    type: Literal["text"]
    text: str


class ImageURL(RequestModel):
    # A `data:` URL (base64) or an `http(s)` URL the server fetches.
    url: str
    # OpenAI's resolution hint; the model's own processor decides the resolution.
    detail: Literal["auto", "low", "high"] | None = None


class ImageContentPart(RequestModel):
    type: Literal["image_url"]
    image_url: ImageURL


class RefusalContentPart(RequestModel):
    """An earlier assistant turn's refusal, sent back: its text, as `vllm serve` reads it."""

    type: Literal["refusal"]
    refusal: str


class OtherContentPart(RequestModel):
    """An audio or file part: parsed so the server can say it can't take it."""

    type: str


ContentPart = Annotated[
    TextContentPart | ImageContentPart | RefusalContentPart | OtherContentPart,
    Field(union_mode="left_to_right"),
]
Content = str | list[ContentPart]


class FunctionCall(RequestModel):
    name: str
    arguments: str


class FunctionToolCall(RequestModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CustomCall(RequestModel):
    name: str
    input: str


class CustomToolCall(RequestModel):
    """An earlier turn's call of a custom tool (free-text input)."""

    id: str
    type: Literal["custom"]
    custom: CustomCall


# `type` may be left out of a function call (the default); a custom call names it.
ToolCall = Annotated[FunctionToolCall | CustomToolCall, Field(union_mode="left_to_right")]


class SystemMessage(RequestModel):
    role: Literal["system"]
    content: Content
    name: str | None = None


class DeveloperMessage(RequestModel):
    role: Literal["developer"]
    content: Content
    name: str | None = None


class UserMessage(RequestModel):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(RequestModel):
    role: Literal["assistant"]
    content: Content | None = None
    refusal: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    # vLLM's: an earlier turn's thinking, for the template (`reasoning_content` is the
    # deprecated name vLLM still takes).
    reasoning: str | None = Field(
        default=None, validation_alias=AliasChoices("reasoning", "reasoning_content")
    )
    # A Responses assistant message's `phase` (`commentary`, `final_answer`), for templates
    # that tell the two apart.
    phase: Literal["commentary", "final_answer"] | None = None


class ToolMessage(RequestModel):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


class FunctionMessage(RequestModel):
    role: Literal["function"]
    content: str | None
    name: str


ChatMessage = Annotated[
    SystemMessage
    | DeveloperMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | FunctionMessage,
    Field(discriminator="role"),
]


class FunctionDefinition(RequestModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatCompletionTool(RequestModel):
    type: Literal["function"]
    function: FunctionDefinition


class TextFormat(RequestModel):
    """Unconstrained free-form text."""

    type: Literal["text"]


class Grammar(RequestModel):
    definition: str
    syntax: Literal["lark", "regex"]


class GrammarFormat(RequestModel):
    """A custom tool's input constrained by a grammar (Lark) or a regular expression."""

    type: Literal["grammar"]
    grammar: Grammar


class CustomToolProperties(RequestModel):
    name: str
    description: str | None = None
    format: (
        Annotated[
            Annotated[TextFormat, Tag("TextFormat")]
            | Annotated[GrammarFormat, Tag("GrammarFormat")],
            by_type({"text": "TextFormat", "grammar": "GrammarFormat"}),
        ]
        | None
    ) = None


class ChatCompletionCustomTool(RequestModel):
    """A tool whose input is free text (`CustomToolChatCompletions` in the spec)."""

    type: Literal["custom"]
    custom: CustomToolProperties


Tool = Annotated[
    Annotated[ChatCompletionTool, Tag("ChatCompletionTool")]
    | Annotated[ChatCompletionCustomTool, Tag("ChatCompletionCustomTool")],
    by_type({"function": "ChatCompletionTool", "custom": "ChatCompletionCustomTool"}),
]


class NamedToolChoiceFunction(RequestModel):
    name: str


class NamedToolChoice(RequestModel):
    type: Literal["function"]
    function: NamedToolChoiceFunction


class NamedToolChoiceCustom(RequestModel):
    type: Literal["custom"]
    custom: NamedToolChoiceFunction


class AllowedTools(RequestModel):
    mode: Literal["auto", "required"]
    # `{"type": "function", "function": {"name": ...}}` or `{"type": "custom", "custom":
    # {"name": ...}}`: tools of `tools`, by name.
    tools: list[dict[str, Any]]


class AllowedToolChoice(RequestModel):
    """Only these of `tools` are offered; `required`: one of them must be called."""

    type: Literal["allowed_tools"]
    allowed_tools: AllowedTools


ToolChoice = (
    Literal["none", "auto", "required"]
    | Annotated[
        Annotated[NamedToolChoice, Tag("NamedToolChoice")]
        | Annotated[NamedToolChoiceCustom, Tag("NamedToolChoiceCustom")]
        | Annotated[AllowedToolChoice, Tag("AllowedToolChoice")],
        by_type(
            {
                "function": "NamedToolChoice",
                "custom": "NamedToolChoiceCustom",
                "allowed_tools": "AllowedToolChoice",
            }
        ),
    ]
    | None
)


class CreateChatCompletionRequest(GenerationRequest):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    logprobs: bool | None = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    max_tokens: TokenCount = None
    max_completion_tokens: TokenCount = None
    store: bool | None = False
    tools: list[Tool] | None = None
    tool_choice: ToolChoice = None
    parallel_tool_calls: bool | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: Any = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    # Groups requests that share a long prefix: the Ray Serve router keeps them on one replica.
    prompt_cache_key: str | None = None

    # vLLM's templating extensions.
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    # vLLM's: false leaves the thinking out of the answer (--reasoning-parser).
    include_reasoning: bool = True


# --- responses -------------------------------------------------------------

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]


class TopLogprob(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatCompletionTokenLogprob(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(ResponseModel):
    content: list[ChatCompletionTokenLogprob] | None
    refusal: list[ChatCompletionTokenLogprob] | None


class FunctionCallOut(ResponseModel):
    name: str
    arguments: str


class ChatCompletionMessageToolCall(ResponseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class CustomCallOut(ResponseModel):
    name: str
    input: str


class ChatCompletionMessageCustomToolCall(ResponseModel):
    id: str
    type: Literal["custom"] = "custom"
    custom: CustomCallOut


MessageToolCall = ChatCompletionMessageToolCall | ChatCompletionMessageCustomToolCall


class ChatCompletionMessage(ResponseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None
    tool_calls: list[MessageToolCall] | None = None
    annotations: list[dict[str, Any]] | None = None
    # vLLM extension (--reasoning-parser): the model's thinking, apart from its answer.
    reasoning: str | None = None


class ChatCompletionChoice(ResponseModel):
    index: int
    message: ChatCompletionMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason | None
    # vLLM extension: the stop string or token id that ended the choice.
    stop_reason: str | int | None = None


class CreateChatCompletionResponse(ResponseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatCompletionChoice]
    usage: CompletionUsage | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None


class FunctionCallChunk(ResponseModel):
    name: str | None = None
    arguments: str | None = None


class CustomCallChunk(ResponseModel):
    name: str | None = None
    input: str | None = None


class ChatCompletionMessageToolCallChunk(ResponseModel):
    index: int
    id: str | None = None
    # `custom`, with `custom: {name, input}`, as OpenAI streams a custom tool's call (the
    # spec's chunk lists `function` only: openai/openai-openapi#576).
    type: Literal["function", "custom"] | None = None
    function: FunctionCallChunk | None = None
    custom: CustomCallChunk | None = None


class ChatCompletionDelta(ResponseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ChatCompletionMessageToolCallChunk] | None = None
    # vLLM extension (--reasoning-parser): the next piece of the model's thinking.
    reasoning: str | None = None


class ChatCompletionChunkChoice(ResponseModel):
    index: int
    delta: ChatCompletionDelta
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason | None
    stop_reason: str | int | None = None


class CreateChatCompletionStreamResponse(ResponseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatCompletionChunkChoice]
    usage: CompletionUsage | None = None
    system_fingerprint: str | None = None
    service_tier: str | None = None
