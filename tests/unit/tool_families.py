"""Each model family's tool-call dialect: its markers, its tokens and its raw outputs.

The raw texts are written in each family's format as vLLM's own parser tests write them
(vllm-project/vllm, tests/tool_parsers/test_<parser>_tool_parser.py: hermes,
llama3_json, llama4_pythonic, deepseekv3, deepseekv31, kimi_k2, glm4_moe, phi4mini,
xlam, internlm2, jamba, qwen3coder, seed_oss, minimax_m2), with these tools.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oai_server.models.embedded_model import ensure_embedded_model

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
    },
}
TOOLS = [WEATHER, TIME]
PLAIN = "The weather in Oslo is mild today."
LEAD = "Let me check. "
_BAR, _LOW = "\uff5c", "\u2581"


def _ds(name: str) -> str:
    """A DeepSeek marker, with its fullwidth bars and lower blocks, from words."""
    return f"<{_BAR}{name.replace(' ', _LOW)}{_BAR}>"


# DeepSeek V3's and V3.1's tool-call tokens (the same five).
DEEPSEEK_TOKENS = tuple(
    _ds(n)
    for n in ("tool calls begin", "tool calls end", "tool call begin", "tool call end", "tool sep")
)


@dataclass(frozen=True)
class Family:
    name: str
    parser: str
    tokens: tuple[str, ...]
    # Markers of the family's chat template (a line of it, with the tokens it writes).
    template_marker: str
    one: str
    # Two calls in one answer; None for a format of one call a turn (InternLM2's: vLLM's
    # parser reads one `<|action_start|><|plugin|>` block and fails on a second).
    two: str | None
    lead: bool = True  # whether the family's parser reads a call after text
    # Whether vLLM's parser streams the calls it reads whole: phi4_mini_json streams none
    # (its calls come as content), xlam sends a call's arguments twice (vLLM 0.32). The
    # sum of this server's deltas still equals vLLM's, which is what `vllm serve` sends.
    streams_calls: bool = True


def _json(name: str, key: str, value: str, args: str = "arguments") -> str:
    return json.dumps({"name": name, args: {key: value}})


W, T = ("get_weather", "city", "Oslo"), ("get_time", "zone", "CET")

FAMILIES = [
    Family(
        "hermes-qwen",
        "hermes",
        ("<tool_call>", "</tool_call>"),
        "<tool_call>",
        f"<tool_call>\n{_json(*W)}\n</tool_call>",
        f"<tool_call>\n{_json(*W)}\n</tool_call>\n<tool_call>\n{_json(*T)}\n</tool_call>",
    ),
    Family(
        "llama-3",
        "llama3_json",
        ("<|python_tag|>", "<|eom_id|>", "<|start_header_id|>"),
        "<|start_header_id|>ipython<|eom_id|>",
        _json(*W, args="parameters"),
        f"{_json(*W, args='parameters')}; {_json(*T, args='parameters')}",
        lead=False,
    ),
    Family(
        "llama-4",
        "llama4_pythonic",
        ("<|header_start|>", "<|python_start|>", "<|python_end|>"),
        "<|header_start|>",
        "[get_weather(city='Oslo')]",
        "[get_weather(city='Oslo'), get_time(zone='CET')]",
        lead=False,
    ),
    Family(
        "deepseek-v3",
        "deepseek_v3",
        DEEPSEEK_TOKENS,
        _ds("tool calls begin") + "function" + _ds("tool sep") + "name\n```json\n",
        _ds("tool calls begin")
        + _ds("tool call begin")
        + "function"
        + _ds("tool sep")
        + 'get_weather\n```json\n{"city": "Oslo"}\n```'
        + _ds("tool call end")
        + _ds("tool calls end"),
        _ds("tool calls begin")
        + _ds("tool call begin")
        + "function"
        + _ds("tool sep")
        + 'get_weather\n```json\n{"city": "Oslo"}\n```'
        + _ds("tool call end")
        + "\n"
        + _ds("tool call begin")
        + "function"
        + _ds("tool sep")
        + 'get_time\n```json\n{"zone": "CET"}\n```'
        + _ds("tool call end")
        + _ds("tool calls end"),
    ),
    Family(
        "deepseek-v3.1",
        "deepseek_v31",
        DEEPSEEK_TOKENS,
        _ds("tool calls begin") + _ds("tool call begin") + "name" + _ds("tool sep"),
        _ds("tool calls begin")
        + _ds("tool call begin")
        + "get_weather"
        + _ds("tool sep")
        + '{"city": "Oslo"}'
        + _ds("tool call end")
        + _ds("tool calls end"),
        _ds("tool calls begin")
        + _ds("tool call begin")
        + "get_weather"
        + _ds("tool sep")
        + '{"city": "Oslo"}'
        + _ds("tool call end")
        + _ds("tool call begin")
        + "get_time"
        + _ds("tool sep")
        + '{"zone": "CET"}'
        + _ds("tool call end")
        + _ds("tool calls end"),
    ),
    Family(
        "kimi-k2",
        "kimi_k2",
        (
            "<|tool_calls_section_begin|>",
            "<|tool_calls_section_end|>",
            "<|tool_call_begin|>",
            "<|tool_call_end|>",
            "<|tool_call_argument_begin|>",
        ),
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>'
        "<|tool_call_begin|>functions.get_time:1"
        '<|tool_call_argument_begin|>{"zone": "CET"}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    Family(
        "glm-4.5",
        "glm45",
        ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
        "<tool_call>{{ name }}<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "</tool_call>",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "</tool_call><tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>CET</arg_value>\n"
        "</tool_call>",
    ),
    Family(
        "phi-4-mini",
        "phi4_mini_json",
        ("<|tool|>", "<|/tool|>"),
        "<|tool|>{{ tools | tojson }}<|/tool|>",
        f"functools[{_json(*W)}]",
        f"functools[{_json(*W)}, {_json(*T)}]",
        lead=False,
        streams_calls=False,
    ),
    Family(
        "xlam",
        "xlam",
        (),
        "[BEGIN OF TASK INSTRUCTION]",
        f"[{_json(*W)}]",
        f"[{_json(*W)}, {_json(*T)}]",
        lead=False,
        streams_calls=False,
    ),
    Family(
        "internlm",
        "internlm",
        ("<|action_start|>", "<|action_end|>", "<|plugin|>"),
        "<|action_start|><|plugin|>",
        f"<|action_start|><|plugin|>\n{_json(*W, args='parameters')}<|action_end|>",
        None,
    ),
    Family(
        "qwen3-coder",
        "qwen3_coder",
        ("<tool_call>", "</tool_call>"),
        "<tool_call>\n<function=name>\n<parameter=key>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
        "</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
        "</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n"
        "</function>\n</tool_call>",
    ),
    Family(
        "minimax-m2",
        "minimax_m2",
        ("<minimax:tool_call>", "</minimax:tool_call>"),
        "<minimax:tool_call>",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
        "</parameter>\n</invoke>\n</minimax:tool_call>",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
        '</parameter>\n</invoke>\n<invoke name="get_time">\n<parameter name="zone">CET'
        "</parameter>\n</invoke>\n</minimax:tool_call>",
    ),
    Family(
        "seed-oss",
        "seed_oss",
        ("<seed:tool_call>", "</seed:tool_call>"),
        "<seed:tool_call>",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
        "</function>\n</seed:tool_call>",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
        "</function>\n</seed:tool_call><seed:tool_call>\n<function=get_time>\n"
        "<parameter=zone>CET</parameter>\n</function>\n</seed:tool_call>",
    ),
]


@functools.cache
def _embedded_dir() -> Path:
    return ensure_embedded_model(Path.home() / ".cache" / "oai-server", "float32")


@functools.cache
def family_tokenizer(family: Family) -> Any:
    """The embedded model's tokenizer with the family's tokens and template markers, behind
    vLLM's cache of its vocabulary (as the engine hands it to the server and its parsers)."""
    from transformers import AutoTokenizer
    from vllm.tokenizers.hf import get_cached_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(_embedded_dir())
    if family.tokens:
        tokenizer.add_special_tokens({"additional_special_tokens": list(family.tokens)})
    tokenizer.chat_template = (
        "{#- " + family.template_marker.replace("{{", "{ {").replace("}}", "} }") + " -#}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return get_cached_tokenizer(tokenizer)


def pieces(tokenizer: Any, text: str) -> list[str]:
    """`text` as the model streams it: one piece per token."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    out, before = [], ""
    for i in range(len(ids)):
        now = tokenizer.decode(ids[: i + 1])
        out.append(now[len(before) :])
        before = now
    assert "".join(out) == text
    return out
