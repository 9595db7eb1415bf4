"""A conversation's items as the chat messages the model sees, and how it makes room.

Both the Realtime session and a Responses request first turn their own items into these
neutral ones, so an earlier turn's function calls and their outputs reach the model's
template the same way, and the same conversation is cut the same way, whichever API
carries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from schemas.chat import (
    AssistantMessage,
    ChatMessage,
    ContentPart,
    CustomCall,
    CustomToolCall,
    FunctionCall,
    FunctionToolCall,
    ImageContentPart,
    ImageURL,
    SystemMessage,
    TextContentPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)


@dataclass(frozen=True, slots=True)
class Said:
    """A message: someone's text."""

    role: Literal["system", "developer", "user", "assistant"]
    text: str
    # A user's images, as URLs (`data:` or `http(s)`), shown to the model before the text.
    images: tuple[str, ...] = ()
    # An assistant message's Responses `phase` (`commentary`, `final_answer`), if it had one.
    phase: Literal["commentary", "final_answer"] | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """A function call the assistant made."""

    call_id: str
    name: str
    arguments: str
    # A custom tool's call: `arguments` is its input text.
    custom: bool = False


@dataclass(frozen=True, slots=True)
class CallOutput:
    """What a function call returned."""

    call_id: str
    output: str


@dataclass(frozen=True, slots=True)
class Thought:
    """The assistant's thinking in an earlier turn (a reasoning item, a thinking block)."""

    text: str


ContextItem = Said | Call | CallOutput | Thought


def to_messages(instructions: str | None, items: Sequence[ContextItem]) -> list[ChatMessage]:
    """The chat messages for `instructions` and `items`, in order.

    Consecutive function calls (and the assistant text just before them) become one
    assistant message with several tool calls, as chat templates expect them. A thought
    opens an assistant message of its own (its `reasoning`) that the text and calls after
    it join, as vLLM's Responses builds it: the model's template decides whether an
    earlier turn's thinking is shown to the model again (most leave it out).
    """
    messages: list[ChatMessage] = []
    if instructions:
        messages.append(SystemMessage(role="system", content=instructions))
    for item in items:
        last = messages[-1] if messages else None
        if isinstance(item, Thought):
            if isinstance(last, AssistantMessage) and last.reasoning is None:
                last.reasoning = item.text
            else:
                messages.append(AssistantMessage(role="assistant", reasoning=item.text))
        elif isinstance(item, Said):
            if item.role == "assistant":
                if isinstance(last, AssistantMessage) and _thought_only(last):
                    last.content = item.text
                    last.phase = item.phase
                else:
                    said = AssistantMessage(role="assistant", content=item.text, phase=item.phase)
                    messages.append(said)
            elif item.role == "user" and item.images:
                parts: list[ContentPart] = [
                    ImageContentPart(type="image_url", image_url=ImageURL(url=url))
                    for url in item.images
                ]
                parts.append(TextContentPart(type="text", text=item.text))
                messages.append(UserMessage(role="user", content=parts))
            elif item.role == "user":
                messages.append(UserMessage(role="user", content=item.text))
            else:
                messages.append(SystemMessage(role="system", content=item.text))
        elif isinstance(item, Call):
            call: ToolCall = FunctionToolCall(
                id=item.call_id, function=FunctionCall(name=item.name, arguments=item.arguments)
            )
            if item.custom:
                custom = CustomCall(name=item.name, input=item.arguments)
                call = CustomToolCall(id=item.call_id, type="custom", custom=custom)
            if isinstance(last, AssistantMessage):
                last.tool_calls = [*(last.tool_calls or []), call]
            else:
                messages.append(AssistantMessage(role="assistant", tool_calls=[call]))
        else:
            messages.append(
                ToolMessage(role="tool", content=item.output, tool_call_id=item.call_id)
            )
    return messages


def _thought_only(message: AssistantMessage) -> bool:
    return message.reasoning is not None and message.content is None and not message.tool_calls


def oldest_to_drop(items: Sequence[ContextItem]) -> int:
    """How many of the oldest items to drop to make room; 0 when nothing may go.

    The last item (what is being answered) always stays, and a function's output never
    starts the context without the call it answers: it goes with that call.
    """
    if len(items) < 2:
        return 0
    count = 1
    while count < len(items) - 1 and isinstance(items[count], CallOutput):
        count += 1
    return count
