"""`/v1/responses` items as the server sends and stores them, as OpenAI's spec has them.

A message, a function call, a function call's output or the model's reasoning, each with
an id and a status: the one shape of items in responses, in their input item lists and in
conversations (what a client sends is parsed in `schemas.responses`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from schemas.common import ResponseModel

ItemStatus = Literal["in_progress", "completed", "incomplete"]
# An assistant message's label: intermediate commentary (before tool calls) or the final
# answer; agents (Codex) send it back on every assistant message.
MessagePhase = Literal["commentary", "final_answer"]


class InputTextContent(ResponseModel):
    type: Literal["input_text"] = "input_text"
    text: str


class InputImageContent(ResponseModel):
    """An image as a stored item keeps it: the URL or the uploaded file it came from."""

    type: Literal["input_image"] = "input_image"
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high"] = "auto"


class TopLogProb(ResponseModel):
    token: str
    logprob: float
    bytes: list[int]


class LogProb(ResponseModel):
    """One output token's log probability, and its likeliest alternatives."""

    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogProb]


class OutputTextContent(ResponseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[LogProb] = Field(default_factory=list)


class MessageItem(ResponseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    status: ItemStatus
    content: list[
        Annotated[
            InputTextContent | InputImageContent | OutputTextContent, Field(discriminator="type")
        ]
    ]
    # Kept as the client sent it on an assistant message; left out when there is none
    # (Open Responses has no null for it).
    phase: MessagePhase | None = None


class FunctionCallItem(ResponseModel):
    id: str
    type: Literal["function_call"] = "function_call"
    call_id: str
    name: str
    arguments: str
    status: ItemStatus
    # The namespace tool the function is one of (left out for a function of its own).
    namespace: str | None = None


class CustomToolCallItem(ResponseModel):
    """A call of a custom tool: its input is free text."""

    id: str
    type: Literal["custom_tool_call"] = "custom_tool_call"
    call_id: str
    name: str
    input: str
    status: ItemStatus
    namespace: str | None = None


class CustomToolCallOutputItem(ResponseModel):
    id: str
    type: Literal["custom_tool_call_output"] = "custom_tool_call_output"
    call_id: str
    output: str | list[dict[str, Any]]
    status: ItemStatus


class FunctionCallOutputItem(ResponseModel):
    id: str
    type: Literal["function_call_output"] = "function_call_output"
    call_id: str
    output: str | list[dict[str, Any]]
    status: ItemStatus


class ReasoningTextContent(ResponseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class SummaryTextContent(ResponseModel):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningItem(ResponseModel):
    """The model's thinking, before its answer (a model served with a reasoning parser)."""

    id: str
    type: Literal["reasoning"] = "reasoning"
    summary: list[SummaryTextContent] = Field(default_factory=list)
    content: list[ReasoningTextContent] = Field(default_factory=list)
    # Sent only when asked for (`include: ["reasoning.encrypted_content"]`).
    encrypted_content: str | None = None
    status: ItemStatus


class CompactionItem(ResponseModel):
    """What `/v1/responses/compact` (or `context_management`) made of the history before
    it: a summary, sealed with the server's secret; it stands for that history."""

    id: str
    type: Literal["compaction"] = "compaction"
    encrypted_content: str


Item = Annotated[
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | CustomToolCallItem
    | CustomToolCallOutputItem
    | ReasoningItem
    | CompactionItem,
    Field(discriminator="type"),
]
