"""The server-sent events of a streamed `/v1/responses` call, as OpenAI's spec has them.

Each event carries a `sequence_number`, its place in the stream (0, 1, 2, ...), so a
client that reconnects can say where it left off.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import ResponseModel
from schemas.response_items import Item, OutputTextContent, ReasoningTextContent
from schemas.responses import Response


class ResponseTopLogProb(ResponseModel):
    token: str
    logprob: float


class ResponseLogProb(ResponseModel):
    """A streamed token's log probability (no bytes, unlike the output part's `LogProb`)."""

    token: str
    logprob: float
    top_logprobs: list[ResponseTopLogProb]


class ResponseLifecycleEvent(ResponseModel):
    """`response.created` ... `response.completed`: the response object as it stands."""

    type: Literal[
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
    ]
    sequence_number: int
    response: Response


class OutputItemEvent(ResponseModel):
    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int
    sequence_number: int
    item: Item


class ContentPartEvent(ResponseModel):
    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: Annotated[OutputTextContent | ReasoningTextContent, Field(discriminator="type")]
    sequence_number: int


class OutputTextDeltaEvent(ResponseModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str
    sequence_number: int
    logprobs: list[ResponseLogProb] = Field(default_factory=list)


class OutputTextDoneEvent(ResponseModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str
    sequence_number: int
    logprobs: list[ResponseLogProb] = Field(default_factory=list)


class ReasoningTextDeltaEvent(ResponseModel):
    type: Literal["response.reasoning_text.delta"] = "response.reasoning_text.delta"
    item_id: str
    output_index: int
    content_index: int
    delta: str
    sequence_number: int


class ReasoningTextDoneEvent(ResponseModel):
    type: Literal["response.reasoning_text.done"] = "response.reasoning_text.done"
    item_id: str
    output_index: int
    content_index: int
    text: str
    sequence_number: int


class ArgumentsDeltaEvent(ResponseModel):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    item_id: str
    output_index: int
    delta: str
    sequence_number: int


class ArgumentsDoneEvent(ResponseModel):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    name: str
    output_index: int
    arguments: str
    sequence_number: int


class CustomToolCallInputDeltaEvent(ResponseModel):
    type: Literal["response.custom_tool_call_input.delta"] = "response.custom_tool_call_input.delta"
    item_id: str
    output_index: int
    delta: str
    sequence_number: int


class CustomToolCallInputDoneEvent(ResponseModel):
    type: Literal["response.custom_tool_call_input.done"] = "response.custom_tool_call_input.done"
    item_id: str
    output_index: int
    input: str
    sequence_number: int


class ErrorEvent(ResponseModel):
    type: Literal["error"] = "error"
    code: str | None
    message: str
    param: str | None
    sequence_number: int


ResponseStreamEvent = (
    ResponseLifecycleEvent
    | OutputItemEvent
    | ContentPartEvent
    | OutputTextDeltaEvent
    | OutputTextDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | ArgumentsDeltaEvent
    | ArgumentsDoneEvent
    | CustomToolCallInputDeltaEvent
    | CustomToolCallInputDoneEvent
    | ErrorEvent
)
