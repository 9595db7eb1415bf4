"""Each thinking family's raw output: its thinking markup, then an answer or a call.

The thinking is written as vLLM's own reasoning-parser tests write it
(vllm-project/vllm, tests/reasoning/test_<name>_reasoning_parser.py: deepseekr1,
deepseekv3, kimi_k2, glm4_moe, minimax_m2, seedoss, qwen3, mistral, granite), and the
call after it in the family's tool-call form of `tests.unit.tool_families` (taken from
vLLM's tool-parser tests; Mistral's and Granite's from test_mistral_tool_parser.py and
test_granite_tool_parser.py). Each family here is its tool family with the thinking's
tokens added and its chat template's thinking markers, so `auto` picks both parsers.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from tests.unit.tool_families import FAMILIES, PLAIN, Family

REASONING = "This is a reasoning section"
THINK = ("<think>", "</think>")


@dataclass(frozen=True)
class Thinker:
    """A family that thinks: its tool family with the thinking added, and its raw texts."""

    family: Family
    reasoning_parser: str  # the one `auto` picks, as vLLM's docs pair it with the family
    opening: str  # what the model writes before its thinking ("" where the prompt opens it)
    closing: str  # what ends the thinking and starts the answer
    # chat_template_kwargs the family's thinking is switched on with (DeepSeek V3.1's is off
    # unless asked for, as in vLLM).
    template_kwargs: tuple[tuple[str, bool], ...] = ()
    # Whether vLLM 0.32's pair streams a call after the thinking as it reads it whole. Its
    # granite pair does not (a vLLM bug): the tool phase never starts after Granite's
    # "Here is my response:", so `vllm serve` streams the call as content text while its
    # whole answer has the call. This server streams the call, as the whole answer has it.
    vllm_streams_call: bool = True

    @property
    def name(self) -> str:
        return self.family.name

    def then(self, answer: str) -> str:
        return f"{self.opening}{REASONING}{self.closing}{answer}"

    @property
    def answer(self) -> str:
        return self.then(PLAIN)

    @property
    def call(self) -> str:
        return self.then(self.family.one)


def _family(name: str) -> Family:
    return next(f for f in FAMILIES if f.name == name)


def _thinking(base: Family, tokens: tuple[str, ...], marker: str = "") -> Family:
    """`base` with the thinking's tokens among its own and `marker` in its template."""
    return dataclasses.replace(
        base,
        name=base.name + "-thinking",
        tokens=base.tokens + tokens,
        template_marker=base.template_marker + marker,
    )


_CALL_ARGS = {"name": "get_weather", "arguments": {"city": "Oslo"}}

MISTRAL = Family(
    "mistral",
    "mistral",
    ("[TOOL_CALLS]", "[ARGS]"),
    "[AVAILABLE_TOOLS][TOOL_CALLS]",
    '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}',
    '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}',
)
GRANITE = Family(
    "granite",
    "granite",
    ("<|start_of_role|>", "<|end_of_role|>", "<|tool_call|>"),
    "<|start_of_role|>assistant<|end_of_role|><|tool_call|>",
    f"<|tool_call|>{json.dumps([_CALL_ARGS])}",
    f"<|tool_call|>{json.dumps([_CALL_ARGS, {'name': 'get_time', 'arguments': {'zone': 'CET'}}])}",
)

THINKERS = [
    # DeepSeek V3 with R1's thinking: the prompt opens it, the model writes only the close.
    Thinker(_thinking(_family("deepseek-v3"), THINK), "deepseek_r1", "", "</think>"),
    Thinker(
        _thinking(_family("deepseek-v3.1"), THINK),
        "deepseek_v3",
        "",
        "</think>",
        (("thinking", True),),
    ),
    Thinker(_thinking(_family("kimi-k2"), THINK), "kimi_k2", "<think>", "</think>"),
    Thinker(_thinking(_family("glm-4.5"), THINK), "glm45", "<think>", "</think>"),
    Thinker(_thinking(_family("minimax-m2"), THINK), "minimax_m2", "", "</think>"),
    Thinker(
        _thinking(_family("seed-oss"), ("<seed:think>", "</seed:think>")),
        "seed_oss",
        "<seed:think>",
        "</seed:think>",
    ),
    Thinker(_thinking(_family("hermes-qwen"), THINK), "qwen3", "<think>", "</think>\n\n"),
    Thinker(_thinking(_family("qwen3-coder"), THINK), "qwen3", "<think>", "</think>\n\n"),
    Thinker(_thinking(MISTRAL, ("[THINK]", "[/THINK]")), "mistral", "[THINK]", "[/THINK]"),
    Thinker(
        _thinking(GRANITE, (), "{%- if thinking %}"),
        "granite",
        "Here is my thought process: ",
        " Here is my response: ",
        vllm_streams_call=False,
    ),
]
