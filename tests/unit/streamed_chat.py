"""What a client adds up from a streamed chat completion: the sum of its deltas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Streamed:
    """A streamed answer summed as a client sums it (one choice)."""

    reasoning: str = ""
    content: str = ""
    # (name, arguments) of each call, in index order.
    calls: list[tuple[str, str]] = field(default_factory=list)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    # vLLM's stream only: the tokens whose delta was thinking alone.
    reasoning_only_tokens: int = 0


def sum_of_stream(reply_text: str) -> Streamed:
    """The deltas of an SSE reply summed; each call's delta must come in OpenAI's shape: the
    id, type and name first (once), then argument pieces."""
    summed = Streamed()
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for line in reply_text.split("\n\n"):
        if not line.startswith("data: {"):
            continue
        event = json.loads(line.removeprefix("data: "))
        summed.usage = event.get("usage") or summed.usage
        for choice in event["choices"]:
            delta = choice["delta"]
            summed.reasoning += delta.get("reasoning") or ""
            summed.content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                index = call["index"]
                if "id" in call:
                    assert call["type"] == "function"
                    assert call["function"]["name"]
                    assert index not in names
                    names[index] = call["function"]["name"]
                assert index in names
                arguments[index] = arguments.get(index, "") + call["function"]["arguments"]
            summed.finish = choice["finish_reason"] or summed.finish
    summed.calls = [(names[i], arguments.get(i, "")) for i in sorted(names)]
    return summed


def sum_of_vllm_stream(parser: Any, request: Any, tokenizer: Any, parts: list[str]) -> Streamed:
    """What `vllm serve` streams for the text `parts` (one token each) through vLLM's
    `parser` (its `parse_delta`, reasoning and tool calls in one), summed as above."""
    summed = Streamed()
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for i, piece in enumerate(parts):
        ids = tokenizer.encode(piece, add_special_tokens=False)
        last = i == len(parts) - 1
        delta = parser.parse_delta(piece, ids, request, prompt_token_ids=[], finished=last)
        if delta is None:
            continue
        summed.reasoning += delta.reasoning or ""
        summed.content += delta.content or ""
        if delta.reasoning and not delta.content:
            summed.reasoning_only_tokens += len(ids)
        for call in delta.tool_calls:
            if call.function and call.function.name:
                names[call.index] = call.function.name
            if call.function and call.function.arguments:
                arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
    summed.calls = [(names[i], arguments.get(i, "")) for i in sorted(names)]
    return summed
