"""What `vllm serve` itself makes of a gpt-oss request and answer: vLLM's `HarmonyParser`
(as `ParserManager` gives it for a gpt-oss model) fed the same token ids, whole (`parse`)
and token by token (`parse_delta`), and vLLM's renderer's harmony prompt. The reference the
harmony tests compare the server with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import chat_body
from tests.unit.harmony_outputs import TOOLS, HarmonyTokenizer, pieces, token_ids

MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the weather in Tokyo?"},
]


def engine_for(text: str) -> FakeEngine:
    return FakeEngine(tokens=pieces(text), model_tokenizer=HarmonyTokenizer())


def ask(**overrides: Any) -> dict[str, Any]:
    """A chat request of `MESSAGES` with `TOOLS`."""
    return chat_body(**{"messages": MESSAGES, "tools": TOOLS, **overrides})


def _vllm_parser(body: dict[str, Any]) -> tuple[Any, Any]:
    """vLLM's parser for a gpt-oss model, as `vllm serve` makes it (`is_harmony`)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    cls = ParserManager.get_parser(
        tool_parser_name="openai",
        reasoning_parser_name="openai_gptoss",
        enable_auto_tools=True,
        is_harmony=True,
    )
    assert cls is not None
    request = ChatCompletionRequest.model_validate(body)
    return cls(HarmonyTokenizer(), request.tools), request


def vllm_whole(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The message and reasoning tokens `vllm serve` answers `text` with, not streamed."""
    parser, request = _vllm_parser(body)
    ids = token_ids(text)
    reasoning, content, calls = parser.parse(
        "", request, enable_auto_tools=True, model_output_token_ids=ids
    )
    return {
        "reasoning": reasoning if request.include_reasoning else None,
        "content": content,
        "calls": [(c.name, c.arguments) for c in calls or []],
        "reasoning_tokens": parser.count_reasoning_tokens(ids),
    }


def vllm_stream(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The sum of the deltas `vllm serve` streams `text` with, fed token by token."""
    parser, request = _vllm_parser(body)
    ids = token_ids(text)
    reasoning, content, names, arguments = "", "", {}, {}
    for i, token in enumerate(ids):
        delta = parser.parse_delta("", [token], request, [], finished=i == len(ids) - 1)
        if delta is None:
            continue
        reasoning += delta.reasoning or ""
        content += delta.content or ""
        for call in delta.tool_calls:
            if call.function.name:
                names[call.index] = call.function.name
            arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
    return {
        "reasoning": reasoning or None,
        "content": content or None,
        "calls": [(names[i], arguments[i]) for i in sorted(names)],
        "reasoning_tokens": parser.count_reasoning_tokens(ids),
    }


def vllm_prompt(body: dict[str, Any]) -> list[int]:
    """The prompt `vllm serve`'s renderer makes of `body` for a gpt-oss model."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.renderers.online_renderer import OnlineRenderer

    request = ChatCompletionRequest.model_validate(body)
    renderer = SimpleNamespace(supports_browsing=False, supports_code_interpreter=False)
    renderer.renderer = None
    _, inputs = OnlineRenderer._make_request_with_harmony(renderer, request)  # type: ignore[arg-type]
    return list(inputs[0]["prompt_token_ids"])


# An earlier turn that thought, called a tool and had its output, then answered; and a
# new question: harmony drops the thinking that came before the last final answer.
