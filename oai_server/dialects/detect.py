"""Recognise a model's family and name the parsers it needs.

Each family is told by the markers its chat template writes and its tokenizer holds
(the tokens its tool calls and thinking are written with), else by its architecture.
The rules run in order, the most specific first: Qwen3-Coder writes `<tool_call>` as
Hermes does, but with `<function=` inside; DeepSeek V3 and V3.1 share their tokens and
differ in how a call's arguments are written. The names are those of vLLM 0.32's
registries, as its documentation (docs/features/tool_calling.md, reasoning_outputs.md)
pairs them with each family. A model that thinks between `<think>` and `</think>` but
shows no family's markers is the generic thinking family, tried last.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelTraits:
    """What a model shows of itself: its chat template, added tokens and architectures."""

    chat_template: str = ""
    special_tokens: frozenset[str] = frozenset()
    architectures: tuple[str, ...] = ()

    def has(self, *markers: str) -> bool:
        """Whether every one of `markers` is in the template or among the tokens."""
        return all(m in self.chat_template or m in self.special_tokens for m in markers)

    def any(self, *markers: str) -> bool:
        return any(self.has(m) for m in markers)

    def architecture(self, *prefixes: str) -> bool:
        return any(a.startswith(prefixes) for a in self.architectures)


@dataclass(frozen=True)
class Dialect:
    """A model family and the parsers for it (None: the family has no such parser)."""

    family: str
    tool_call_parser: str | None
    reasoning_parser: str | None


def _thinks(traits: ModelTraits, parser: str) -> str | None:
    return parser if traits.has("<think>", "</think>") else None


# The built-in parser of a generic thinking model: thinking only between the tags
# (`reasoning.tags`); none of vLLM 0.32's reads an answer without them as content.
THINK_TAGS = "think"
GENERIC_THINKING = "generic-think"

# R1's history rule: an earlier answer keeps only what follows `</think>`.
_STRIPS_THINKING = re.compile(r"""split\(\s*['"]</think>['"]\s*\)""")


def _generic_thinking(traits: ModelTraits) -> str:
    """`deepseek_r1` for a template of R1's lineage, which opens `<think>` in its
    generation prompt or strips earlier answers' thinking: such a model may start
    thinking without writing `<think>` (R1's distills do), which R1's parser reads as
    thinking. Any other model writes both tags: split where they are (`THINK_TAGS`), so
    an answer without them stays content."""
    template = traits.chat_template
    _, found, generation_prompt = template.rpartition("add_generation_prompt")
    opens = bool(found) and "<think>" in generation_prompt
    return "deepseek_r1" if opens or _STRIPS_THINKING.search(template) else THINK_TAGS


# DeepSeek writes its markers with fullwidth bars (U+FF5C) and lower blocks (U+2581).
_BAR = "\uff5c"
_DEEPSEEK_CALLS = f"<{_BAR}tool\u2581calls\u2581begin{_BAR}>"
_DEEPSEEK_ASSISTANT = f"<{_BAR}Assistant{_BAR}>"

# (family, test, tool-call parser, reasoning parser or a function of the traits)
_Rule = tuple[str, Callable[[ModelTraits], bool], str | None, Callable[[ModelTraits], str | None]]

_RULES: list[_Rule] = [
    (
        "gpt-oss",
        lambda t: t.has("<|channel|>") or t.architecture("GptOss"),
        "openai",
        lambda t: "openai_gptoss",
    ),
    ("kimi-k2", lambda t: t.has("<|tool_calls_section_begin|>"), "kimi_k2", lambda t: "kimi_k2"),
    (
        "deepseek-v3",
        lambda t: t.has(_DEEPSEEK_CALLS) and "```json" in t.chat_template,
        "deepseek_v3",
        lambda t: _thinks(t, "deepseek_r1"),
    ),
    ("deepseek-v3.1", lambda t: t.has(_DEEPSEEK_CALLS), "deepseek_v31", lambda t: "deepseek_v3"),
    (
        "deepseek-r1-distill",
        lambda t: t.has(_DEEPSEEK_ASSISTANT, "</think>"),
        None,
        lambda t: "deepseek_r1",
    ),
    ("glm-4.5", lambda t: t.has("<arg_key>", "<arg_value>"), "glm45", lambda t: "glm45"),
    ("minimax-m2", lambda t: t.has("<minimax:tool_call>"), "minimax_m2", lambda t: "minimax_m2"),
    ("seed-oss", lambda t: t.has("<seed:tool_call>"), "seed_oss", lambda t: "seed_oss"),
    (
        "qwen3-coder",
        lambda t: t.has("<tool_call>", "<function=", "<parameter="),
        "qwen3_coder",
        lambda t: _thinks(t, "qwen3"),
    ),
    ("hermes-qwen", lambda t: t.has("<tool_call>"), "hermes", lambda t: _thinks(t, "qwen3")),
    ("llama-4", lambda t: t.has("<|header_start|>"), "llama4_pythonic", lambda t: None),
    (
        "llama-3",
        lambda t: t.has("<|start_header_id|>") and t.any("<|python_tag|>", "<|eom_id|>"),
        "llama3_json",
        lambda t: None,
    ),
    (
        "mistral",
        lambda t: t.has("[TOOL_CALLS]"),
        "mistral",
        lambda t: "mistral" if t.has("[THINK]") else None,
    ),
    (
        "granite",
        lambda t: t.has("<|start_of_role|>", "<|tool_call|>"),
        "granite",
        lambda t: "granite" if "thinking" in t.chat_template else None,
    ),
    ("phi-4-mini", lambda t: t.has("<|tool|>", "<|/tool|>"), "phi4_mini_json", lambda t: None),
    ("xlam", lambda t: t.has("[BEGIN OF TASK INSTRUCTION]"), "xlam", lambda t: None),
    ("internlm", lambda t: t.has("<|plugin|>"), "internlm", lambda t: None),
    ("jamba", lambda t: t.has("<tool_calls>") and t.architecture("Jamba"), "jamba", lambda t: None),
    ("functiongemma", lambda t: t.has("<start_function_call>"), "functiongemma", lambda t: None),
    # Last: `<think>` and `</think>` with no family's markers (QwQ, Phi-4-reasoning,
    # OpenThinker, a distill of a family of none above): it thinks, its calls (if any)
    # are read as a model of no family's.
    (GENERIC_THINKING, lambda t: t.has("<think>", "</think>"), None, _generic_thinking),
]

# The families recognised, in the order they are tried (for the docs and the tests).
FAMILIES = tuple(rule[0] for rule in _RULES)


def detect(traits: ModelTraits) -> Dialect | None:
    """The dialect of the model with `traits`; None if no family's markers are there."""
    for family, test, tool_call_parser, reasoning in _RULES:
        if test(traits):
            return Dialect(family, tool_call_parser, reasoning(traits))
    return None
