"""The chunks of a chat answer: from the light events, and as the response cache replays them."""

from __future__ import annotations

from oai_server.services.common import StreamSettings, usage_of
from oai_server.services.events import (
    ArgumentsDelta,
    Chunks,
    Finish,
    Light,
    Opening,
    ReasoningDelta,
    TextDelta,
    Usage,
)
from schemas.chat import (
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    ChatCompletionMessageToolCallChunk,
    CreateChatCompletionStreamResponse,
    FunctionCallChunk,
)
from schemas.common import CompletionUsage


def chat_chunk(
    id_: str,
    created: int,
    model: str,
    opts: StreamSettings,
    choice: ChatCompletionChunkChoice | None,
    usage: CompletionUsage | None = None,
    service_tier: str | None = None,
) -> CreateChatCompletionStreamResponse:
    """A chunk of the answer `id_` of `model` (the base model's name, or an adapter's),
    as streamed live and as the response cache replays it.

    With `include_usage`, `usage` is null unless given (the last chunk, or continuous stats).
    `service_tier`, the tier served, is on every chunk when the request named one.
    """
    out = CreateChatCompletionStreamResponse(
        id=id_,
        created=created,
        model=model,
        choices=[] if choice is None else [choice],
    )
    if opts.include_usage:
        out.usage = usage
    if service_tier is not None:
        out.service_tier = service_tier
    return out


def chat_chunks(
    identity: tuple[str, int],
    model: str,
    opts: StreamSettings,
    service_tier: str | None = None,
) -> Chunks[CreateChatCompletionStreamResponse]:
    """How the light events of the answer `identity` (`id`, `created`) of `model` become
    its chunks, as streamed live and as the response cache replays them."""

    def build(id_: str, created: int, event: Light) -> CreateChatCompletionStreamResponse:
        if isinstance(event, Usage):
            return chat_chunk(id_, created, model, opts, None, usage_of(event), service_tier)
        return chat_chunk(id_, created, model, opts, light_choice(event), None, service_tier)

    shape = ("chat", model, opts.include_usage, opts.continuous_usage, service_tier)
    return Chunks(build, identity, shape)


def choice_of(index: int, delta: ChatCompletionDelta) -> ChatCompletionChunkChoice:
    return ChatCompletionChunkChoice(index=index, delta=delta, logprobs=None, finish_reason=None)


def light_choice(
    event: TextDelta | ReasoningDelta | ArgumentsDelta | Opening | Finish,
) -> ChatCompletionChunkChoice:
    """The choice of the chunk a light event stands for."""
    if isinstance(event, ArgumentsDelta):
        call = ChatCompletionMessageToolCallChunk(
            index=event.call, function=FunctionCallChunk(arguments=event.text)
        )
        return choice_of(event.index, ChatCompletionDelta(tool_calls=[call]))
    if isinstance(event, Opening):
        return choice_of(event.index, ChatCompletionDelta(role="assistant", content=""))
    if isinstance(event, Finish):
        choice = choice_of(event.index, ChatCompletionDelta())
        choice.finish_reason = event.reason  # type: ignore[assignment]
        return choice
    if isinstance(event, ReasoningDelta):
        return choice_of(event.index, ChatCompletionDelta(reasoning=event.text))
    return choice_of(event.index, ChatCompletionDelta(content=event.text))
