"""vLLM's harmony code for gpt-oss (`openai-harmony`), as `vllm serve` uses it.

`vllm serve` renders a gpt-oss chat request with harmony, not with the model's chat
template (`OnlineRenderer._make_request_with_harmony`), and reads its output token ids
with `vllm.parser.harmony.HarmonyParser` (harmony's `StreamableParser` underneath).
These functions do the same with vLLM's own helpers; vllm is imported inside them, so
importing the server does not import the engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from oai_server.engine.parsing import HarmonyParsing, HarmonyPrompt
from oai_server.errors import InvalidRequestError

# What vLLM's harmony code reads of a chat request; the rest is the server's business.
_FIELDS = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "include_reasoning",
)


def vllm_request(request: dict[str, Any]) -> Any:
    """`request` (a chat request, as JSON) as vLLM's `ChatCompletionRequest`."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    fields = {key: request[key] for key in _FIELDS if request.get(key) is not None}
    try:
        return ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:  # what our schema takes and vLLM's does not
        error = exc.errors()[0]
        param = ".".join(str(part) for part in error["loc"][:1]) or None
        raise InvalidRequestError(f"{error['msg']} (gpt-oss, harmony)", param=param) from exc


def render_prompt(request: dict[str, Any]) -> list[int]:
    """The prompt token ids of the chat request `request` (as JSON), as `vllm serve`
    renders it for gpt-oss: harmony's system message (with `reasoning_effort`), a
    developer message with the instructions and tools, then the conversation, earlier
    turns' reasoning dropped before the last final answer. Raises `InvalidRequestError`
    for what vLLM refuses (a `reasoning_effort` harmony does not know)."""
    from vllm.entrypoints.openai.parser.harmony_utils import (
        build_harmony_preamble,
        extract_instructions_from_messages,
        parse_chat_inputs_to_harmony_messages,
        render_for_completion,
    )
    from vllm.exceptions import VLLMValidationError

    chat = vllm_request(request)
    effort = chat.reasoning_effort
    try:
        if effort == "none":  # as vLLM's renderer refuses it
            raise VLLMValidationError(
                f"Harmony does not support reasoning_effort={effort!r}",
                parameter="reasoning_effort",
            )
        instructions, messages = extract_instructions_from_messages(list(chat.messages))
        preamble = build_harmony_preamble(
            instructions=instructions,
            tools=chat.tools,
            reasoning_effort=effort,
            with_custom_tools=chat.tools is not None,
        )
        conversation = preamble + parse_chat_inputs_to_harmony_messages(messages)
        return list(render_for_completion(conversation))
    except VLLMValidationError as exc:
        raise InvalidRequestError(str(exc.args[0]), param=exc.parameter) from exc


def decode(token_ids: list[int]) -> str:
    """The text of harmony token ids, special tokens written out."""
    from vllm.entrypoints.openai.parser.harmony_utils import get_encoding

    encoding: Callable[[], Any] = get_encoding  # (untyped in vLLM)
    return str(encoding().decode(token_ids))


@functools.cache
def harmony_parser_class(reasoning: bool, tools: bool) -> Any:
    """vLLM's `HarmonyParser` with the gpt-oss reasoning parser (`openai_gptoss`) if
    `reasoning`, its tool-call parser (`openai`) if `tools`: what `ParserManager` gives
    `vllm serve` for a gpt-oss model. A subclass of its own, since `ParserManager` sets
    the parsers on vLLM's class itself, for every model."""
    from vllm.parser import ParserManager
    from vllm.parser.harmony import HarmonyParser

    attributes = {
        "reasoning_parser_cls": ParserManager.get_reasoning_parser(
            "openai_gptoss" if reasoning else None
        ),
        "tool_parser_cls": ParserManager.get_tool_parser("openai" if tools else None, True),
    }
    return type("HarmonyParser", (HarmonyParser,), attributes)


class VLLMHarmony(HarmonyParsing):
    """Harmony as `vllm serve` renders and reads it, its parsers over `tokenizer` (a
    Hugging Face tokenizer's interface)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def render(self, request: dict[str, Any]) -> HarmonyPrompt:
        ids = render_prompt(request)
        return HarmonyPrompt(ids, decode(ids), vllm_request(request))

    def new(self, prompt: HarmonyPrompt, *, reasoning: bool, tools: bool) -> Any:
        return harmony_parser_class(reasoning, tools)(self._tokenizer, prompt.request.tools)
