"""gpt-oss's raw outputs in harmony, and a tokenizer on harmony's own encoding.

The outputs are those of OpenAI's harmony documentation (openai/harmony, docs/format.md
and the cookbook's "OpenAI Harmony Response Format": the "What is 2 + 2?" answer and the
`get_current_weather` call) and of vLLM's tests of its gpt-oss tool parser
(vllm-project/vllm, tests/tool_parsers/test_openai_tool_parser.py: the Tokyo answers,
one call and two), written as the model writes them after the prompt's closing
`<|start|>assistant`: each message on its channel, a call addressed `to=functions.NAME`
and ended by `<|call|>`, an answer by `<|return|>`.

No gpt-oss weights or tokenizer files are needed, nor reachable here: `HarmonyTokenizer`
is the o200k_harmony encoding that `openai-harmony` ships (gpt-oss's vocabulary, its
special tokens included), standing in for the model's tokenizer in the fake engine. Its
chat template is one line of gpt-oss's (it writes `<|channel|>`), by which the server
recognises the family, as it would a real gpt-oss directory's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from openai_harmony import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding

from oai_server.engine.parsing import HarmonyParsing
from oai_server.engine.protocol import Tokenizer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}
LOCATION = {
    "type": "function",
    "function": {
        "name": "get_user_location",
        "description": "Where the user is",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
    },
}
TOOLS = [WEATHER, LOCATION]

_TOKYO = (
    'User asks: "What is the weather in Tokyo?" based on their location. We need to use '
    "get_current_weather tool and get_user_location tool."
)


def _call(name: str, arguments: str) -> str:
    return (
        f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}<|call|>"
    )


PLAIN = "<|channel|>final<|message|>This is a test<|return|>"
THOUGHT_THEN_ANSWER = (
    '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. '
    "Provide answer.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"
)
THOUGHT_THEN_CALL = (
    "<|channel|>analysis<|message|>Need to use function get_current_weather.<|end|>"
    "<|start|>assistant" + _call("get_current_weather", '{"location":"San Francisco"}')
)
TWO_CALLS = (
    f"<|channel|>analysis<|message|>{_TOKYO}<|end|><|start|>assistant"
    + _call("get_current_weather", '{"location": "Tokyo"}')
    + "<|start|>assistant"
    + _call("get_user_location", '{"location": "Tokyo"}')
)

OUTPUTS = {
    "plain": PLAIN,
    "thought then answer": THOUGHT_THEN_ANSWER,
    "thought then call": THOUGHT_THEN_CALL,
    "two calls": TWO_CALLS,
}

# A line of gpt-oss's chat template: what the server recognises the family by.
TEMPLATE = "{{- '<|start|>assistant<|channel|>final<|message|>' }}"


@functools.cache
def encoding() -> HarmonyEncoding:
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


class HarmonyTokenizer(Tokenizer):
    """gpt-oss's vocabulary (harmony's o200k_harmony encoding) as the model's tokenizer."""

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(encoding().encode(text, allowed_special="all"))

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(encoding().decode(list(token_ids)))

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool,
        continue_final_message: bool = False,
        chat_template: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        raise AssertionError("a gpt-oss prompt is rendered with harmony, not a chat template")

    def chat_template_source(self) -> str | None:
        return TEMPLATE

    def special_tokens(self) -> frozenset[str]:
        return frozenset(encoding().special_tokens_set)

    def harmony_parsing(self) -> HarmonyParsing:
        from oai_server.engine.vllm.harmony import VLLMHarmony

        return VLLMHarmony(self)


def token_ids(text: str) -> list[int]:
    """`text`'s harmony token ids, each marker one special token."""
    return list(encoding().encode(text, allowed_special="all"))


def pieces(text: str) -> list[str]:
    """`text` as the model streams it: one piece per token, each encoding back to it."""
    ids = token_ids(text)
    out = [encoding().decode([i]) for i in ids]
    assert [token_ids(p) for p in out] == [[i] for i in ids]
    return out
