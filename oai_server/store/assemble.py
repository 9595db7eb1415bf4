"""A streamed answer folded back into the whole answer, from the chunks the client got."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from schemas.chat import CreateChatCompletionResponse, CreateChatCompletionStreamResponse
from schemas.common import ResponseModel


@dataclass
class _Choice:
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    logprobs: list[Any] | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None


def _decode(event: bytes) -> dict[str, Any] | None:
    """A pre-framed SSE event's JSON payload (`data: {...}\\n\\n`)."""
    payload = event.removeprefix(b"data: ").strip()
    if not payload.startswith(b"{"):
        return None
    decoded: dict[str, Any] = json.loads(payload)
    return decoded


class ChatAssembler:
    """Feed it every chunk of a stream; `response()` is the non-streamed answer they make."""

    def __init__(self) -> None:
        self._head: dict[str, Any] | None = None
        self._usage: dict[str, Any] | None = None
        self._choices: dict[int, _Choice] = {}

    def feed(self, chunk: ResponseModel | bytes) -> None:
        if isinstance(chunk, bytes):
            data = _decode(chunk)
        elif isinstance(chunk, CreateChatCompletionStreamResponse):
            data = chunk.model_dump(mode="json", exclude_unset=True)
        else:
            data = None
        if data is None or data.get("object") != "chat.completion.chunk":
            return
        if self._head is None:
            self._head = {key: data[key] for key in ("id", "created", "model")}
        if data.get("usage"):
            self._usage = data["usage"]
        for choice in data.get("choices", []):
            self._fold(self._choices.setdefault(choice["index"], _Choice()), choice)

    @staticmethod
    def _fold(state: _Choice, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            state.content.append(delta["content"])
        if delta.get("refusal"):
            state.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            into = state.tool_calls.setdefault(
                call["index"], {"id": "", "type": "function", "name": "", "arguments": ""}
            )
            into["id"] = call.get("id") or into["id"]
            function = call.get("function") or {}
            into["name"] += function.get("name") or ""
            into["arguments"] += function.get("arguments") or ""
        logprobs = choice.get("logprobs")
        if logprobs and logprobs.get("content"):
            state.logprobs = (state.logprobs or []) + logprobs["content"]
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]
        if choice.get("stop_reason") is not None:
            state.stop_reason = choice["stop_reason"]

    def response(self) -> CreateChatCompletionResponse | None:
        """The whole answer, or None if no choice finished (the stream was cut short)."""
        if self._head is None or not self._choices:
            return None
        if any(c.finish_reason is None for c in self._choices.values()):
            return None
        choices = []
        for index, c in sorted(self._choices.items()):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(c.content) if c.content or not c.tool_calls else None,
                "refusal": "".join(c.refusal) if c.refusal else None,
            }
            if c.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": t["id"],
                        "type": "function",
                        "function": {"name": t["name"], "arguments": t["arguments"]},
                    }
                    for _, t in sorted(c.tool_calls.items())
                ]
            choice: dict[str, Any] = {
                "index": index,
                "message": message,
                "logprobs": None
                if c.logprobs is None
                else {"content": c.logprobs, "refusal": None},
                "finish_reason": c.finish_reason,
            }
            if c.stop_reason is not None:
                choice["stop_reason"] = c.stop_reason
            choices.append(choice)
        body: dict[str, Any] = {**self._head, "object": "chat.completion", "choices": choices}
        if self._usage is not None:
            body["usage"] = self._usage
        return CreateChatCompletionResponse.model_validate(body)
