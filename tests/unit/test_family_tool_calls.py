"""Tool calls in each model family's own dialect, read by vLLM's parser for that family.

For each family the fake engine streams the family's raw output token by token (the
tokens of the embedded model's tokenizer with the family's special tokens added, so a
marker is one token, as in the family's own vocabulary) through the real server, which
recognises the family from its chat template and tokens (`--tool-call-parser auto`). The
whole answer must equal vLLM's parser's `parse` of the same text, and the sum of the
streamed deltas its `parse_delta` fed the same tokens, as `vllm serve` feeds them.

The raw texts are written in each family's format as vLLM's own parser tests write them
(vllm-project/vllm, tests/tool_parsers/test_<parser>_tool_parser.py: hermes,
llama3_json, llama4_pythonic, deepseekv3, deepseekv31, kimi_k2, glm4_moe, phi4mini,
xlam, internlm2, jamba, qwen3coder, seed_oss, minimax_m2), with this test's tools.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from oai_server.models.embedded_model import ensure_embedded_model
from tests.unit.conftest import chat_body, serve

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
    two: str
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
        f"<|action_start|><|plugin|>\n{_json(*W, args='parameters')}<|action_end|>",
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
    """The embedded model's tokenizer with the family's tokens and template markers."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_embedded_dir())
    if family.tokens:
        tokenizer.add_special_tokens({"additional_special_tokens": list(family.tokens)})
    tokenizer.chat_template = (
        "{#- " + family.template_marker.replace("{{", "{ {").replace("}}", "} }") + " -#}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tokenizer


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


def vllm_parser(family: Family, body: dict[str, Any]) -> tuple[Any, Any]:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    tokenizer = family_tokenizer(family)
    cls = ParserManager.get_parser(
        tool_parser_name=family.parser, enable_auto_tools=True, tokenizer=tokenizer
    )
    assert cls is not None
    request = ChatCompletionRequest.model_validate(
        {k: body[k] for k in ("model", "messages", "tools")}
    )
    return cls(tokenizer, request.tools), request


def expected_whole(family: Family, body: dict[str, Any], text: str) -> tuple[str, list[Any]]:
    parser, request = vllm_parser(family, body)
    tokenizer = family_tokenizer(family)
    ids = tokenizer.encode(text, add_special_tokens=False)
    _, content, calls = parser.parse(
        text, request, enable_auto_tools=True, model_output_token_ids=ids
    )
    return content or "", [(c.name, json.loads(c.arguments)) for c in calls or []]


def expected_stream(family: Family, body: dict[str, Any], text: str) -> tuple[str, list[Any]]:
    parser, request = vllm_parser(family, body)
    tokenizer = family_tokenizer(family)
    content, names, arguments = "", {}, {}
    parts = pieces(tokenizer, text)
    for i, piece in enumerate(parts):
        ids = tokenizer.encode(piece, add_special_tokens=False)
        last = i == len(parts) - 1
        delta = parser.parse_delta(piece, ids, request, prompt_token_ids=[], finished=last)
        if delta is None:
            continue
        content += delta.content or ""
        for call in delta.tool_calls:
            if call.function and call.function.name:
                names[call.index] = call.function.name
            if call.function and call.function.arguments:
                arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
    return content, [(names[i], arguments.get(i, "")) for i in sorted(names)]


def _texts(family: Family) -> list[tuple[str, str]]:
    texts = [("plain", PLAIN), ("one call", family.one), ("two calls", family.two)]
    if family.lead:
        texts.append(("text then a call", LEAD + family.one))
    return texts


CASES = [pytest.param(f, text, id=f"{f.name}-{what}") for f in FAMILIES for what, text in _texts(f)]


def _engine(family: Family, text: str) -> FakeEngine:
    tokenizer = family_tokenizer(family)
    return FakeEngine(tokens=pieces(tokenizer, text), model_tokenizer=VLLMTokenizer(tokenizer))


def _sum_of_stream(reply_text: str) -> tuple[str, list[Any], str | None]:
    content, names, arguments, finish = "", {}, {}, None
    for line in reply_text.split("\n\n"):
        if not line.startswith("data: {"):
            continue
        event = json.loads(line.removeprefix("data: "))
        for choice in event["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:
                    assert call["function"]["name"]
                    assert call["type"] == "function"
                    names[call["index"]] = call["function"]["name"]
                arguments[call["index"]] = (
                    arguments.get(call["index"], "") + call["function"]["arguments"]
                )
            finish = choice["finish_reason"] or finish
    calls = [(names[i], arguments[i]) for i in sorted(names)]
    return content, calls, finish


# The tool-call parser alone, as `vllm serve --tool-call-parser X` gives it: families that also
# think (GLM-4.5, MiniMax-M2, Seed-OSS) get their reasoning parser by `auto` otherwise.
@pytest.mark.parametrize(("family", "text"), CASES)
async def test_whole_answer_is_vllms(family: Family, text: str) -> None:
    body = chat_body(tools=TOOLS)
    async with serve(_engine(family, text), reasoning_parser="none") as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    message = reply.json()["choices"][0]["message"]
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    assert (message["content"] or "", calls) == expected_whole(family, body, text)
    if text != PLAIN:
        assert calls, f"{family.parser} read no call in {text!r}"


@pytest.mark.parametrize(("family", "text"), CASES)
async def test_streamed_deltas_add_up_to_vllms(family: Family, text: str) -> None:
    body = chat_body(tools=TOOLS, stream=True)
    async with serve(_engine(family, text), reasoning_parser="none") as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    content, calls, finish = _sum_of_stream(reply.text)
    assert (content, calls) == expected_stream(family, body, text)
    if text != PLAIN and family.streams_calls:
        assert calls, f"{family.parser} streamed no call in {text!r}"
        assert all(json.loads(arguments) for _, arguments in calls)
    assert finish == ("tool_calls" if calls else "stop")


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
async def test_parallel_tool_calls_false_keeps_the_first(family: Family) -> None:
    body = chat_body(tools=TOOLS, parallel_tool_calls=False)
    async with serve(_engine(family, family.two), reasoning_parser="none") as client:
        whole = await client.post("/v1/chat/completions", json=body)
        streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
    calls = whole.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    _, streamed_calls, _ = _sum_of_stream(streamed.text)
    names = [name for name, _ in streamed_calls]
    assert names == ["get_weather"] or (not family.streams_calls and not names)
