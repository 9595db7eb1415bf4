"""Model families recognised from their chat template, tokens and architecture; the
parsers named for each; the ready line; unknown names refused at start."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from pydantic import ValidationError

from oai_server.dialects import Dialect, ModelTraits, detect
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.tool_families import FAMILIES, family_tokenizer

HELLO = {"role": "user", "content": "Hi"}
_BAR, _LOW = "\uff5c", "\u2581"

# A line of each family's chat template, or the tokens of its vocabulary, as published.
CASES = [
    ("<|start|>assistant<|channel|>analysis<|message|>", (), "gpt-oss", "openai", "openai_gptoss"),
    (
        "{{- '<|im_start|>' }}<tool_call>\n{{ tool_call | tojson }}\n</tool_call>",
        ("<think>", "</think>"),
        "hermes-qwen",
        "hermes",
        "qwen3",
    ),
    ('<tool_call>\n{"name": <function-name>}\n</tool_call>', (), "hermes-qwen", "hermes", None),
    (
        "<tool_call>\n<function=name>\n<parameter=key>\nvalue\n</parameter>",
        (),
        "qwen3-coder",
        "qwen3_coder",
        None,
    ),
    (
        "<|start_header_id|>ipython<|end_header_id|>",
        ("<|python_tag|>", "<|eom_id|>"),
        "llama-3",
        "llama3_json",
        None,
    ),
    ("<|header_start|>assistant<|header_end|>", (), "llama-4", "llama4_pythonic", None),
    (
        "[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS]",
        ("[TOOL_CALLS]",),
        "mistral",
        "mistral",
        None,
    ),
    ("", ("[TOOL_CALLS]", "[THINK]"), "mistral", "mistral", "mistral"),
    (
        f"<{_BAR}tool{_LOW}calls{_LOW}begin{_BAR}>function<{_BAR}tool{_LOW}sep{_BAR}>x\n```json\n",
        ("<think>", "</think>"),
        "deepseek-v3",
        "deepseek_v3",
        "deepseek_r1",
    ),
    (
        f"<{_BAR}tool{_LOW}calls{_LOW}begin{_BAR}><{_BAR}tool{_LOW}call{_LOW}begin{_BAR}>",
        (),
        "deepseek-v3.1",
        "deepseek_v31",
        "deepseek_v3",
    ),
    (
        f"<{_BAR}Assistant{_BAR}>",
        ("<think>", "</think>"),
        "deepseek-r1-distill",
        None,
        "deepseek_r1",
    ),
    (
        "<|start_of_role|>available_tools<|end_of_role|>",
        ("<|tool_call|>",),
        "granite",
        "granite",
        None,
    ),
    ("<|tool_calls_section_begin|>", (), "kimi-k2", "kimi_k2", "kimi_k2"),
    (
        "<tool_call>{{ name }}<arg_key>k</arg_key><arg_value>v</arg_value>",
        (),
        "glm-4.5",
        "glm45",
        "glm45",
    ),
    ("<|system|>{{ m }}<|tool|>{{ tools }}<|/tool|>", (), "phi-4-mini", "phi4_mini_json", None),
    ("[BEGIN OF TASK INSTRUCTION]", (), "xlam", "xlam", None),
    ("<|im_start|>system name=<|plugin|>", (), "internlm", "internlm", None),
    ("<minimax:tool_call>", (), "minimax-m2", "minimax_m2", "minimax_m2"),
    ("<seed:tool_call>", (), "seed-oss", "seed_oss", "seed_oss"),
]


@pytest.mark.parametrize(("template", "tokens", "family", "tools", "reasoning"), CASES)
def test_each_family_is_recognised(
    template: str, tokens: tuple[str, ...], family: str, tools: str | None, reasoning: str | None
) -> None:
    traits = ModelTraits(template, frozenset(tokens))
    assert detect(traits) == Dialect(family, tools, reasoning)


# Families told by their architecture (a config's `architectures`), or not told apart by a
# marker alone; and a family of a marker of its own.
CASES_BEYOND_TEMPLATES = [
    pytest.param(
        ModelTraits(architectures=("GptOssForCausalLM",)),
        Dialect("gpt-oss", "openai", "openai_gptoss"),
        id="gpt-oss by its architecture alone",
    ),
    pytest.param(
        ModelTraits(
            "{{ '<tool_calls>' + tool_calls | tojson }}", architectures=("JambaForCausalLM",)
        ),
        Dialect("jamba", "jamba", None),
        id="jamba",
    ),
    pytest.param(
        ModelTraits(
            "{{ '<tool_calls>' + tool_calls | tojson }}", architectures=("LlamaForCausalLM",)
        ),
        None,
        id="jamba's marker on another architecture",
    ),
    pytest.param(
        ModelTraits("<start_function_call>call:{{ name }}{{ args }}<end_function_call>"),
        Dialect("functiongemma", "functiongemma", None),
        id="functiongemma",
    ),
]


@pytest.mark.parametrize(("traits", "dialect"), CASES_BEYOND_TEMPLATES)
def test_families_told_by_architecture_and_markers(
    traits: ModelTraits, dialect: Dialect | None
) -> None:
    assert detect(traits) == dialect


def test_an_unknown_template_is_no_family() -> None:
    smollm2 = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
    assert detect(ModelTraits(smollm2, frozenset({"<|im_start|>", "<|im_end|>"}))) is None


async def test_ready_line_names_each_models_parser(caplog: pytest.LogCaptureFixture) -> None:
    from oai_server.engine.vllm.holder import VLLMTokenizer

    llama = next(f for f in FAMILIES if f.name == "llama-3")
    engine = FakeEngine(model_tokenizer=VLLMTokenizer(family_tokenizer(llama)))
    with caplog.at_level(logging.INFO, logger="oai_server.app"):
        async with serve(engine):
            pass
    assert "smollm2-135m-instruct: tool calls: llama3_json (llama-3)" in caplog.text


async def test_ready_line_of_an_unknown_family(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="oai_server.app"):
        async with serve(FakeEngine()):
            pass
    assert "smollm2-135m-instruct: tool calls: hermes (built-in)" in caplog.text


async def test_a_family_without_its_parsers_tokens_falls_back_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """DeepSeek-V3's template on a tokenizer without its tool-call tokens: vLLM's parser
    cannot start, so the built-in Hermes parser reads the calls, and the log says why."""
    from oai_server.engine.vllm.holder import VLLMTokenizer
    from tests.unit.tool_families import TOOLS, pieces

    deepseek = next(f for f in FAMILIES if f.name == "deepseek-v3")
    tokenizer = family_tokenizer(dataclasses.replace(deepseek, tokens=()))
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    engine = FakeEngine(tokens=pieces(tokenizer, call), model_tokenizer=VLLMTokenizer(tokenizer))
    with caplog.at_level(logging.INFO):
        async with serve(engine) as client:
            reply = await client.post("/v1/chat/completions", json=chat_body(tools=TOOLS))
    assert "tool-call parser deepseek_v3 cannot serve this model" in caplog.text
    warned = [r for r in caplog.records if "deepseek_v3 cannot serve" in r.getMessage()]
    assert [r.levelno for r in warned] == [logging.WARNING]
    assert "smollm2-135m-instruct: tool calls: hermes (built-in)" in caplog.text
    (made,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert made["function"]["name"] == "get_weather"


def test_an_unknown_parser_name_stops_the_start_listing_the_valid() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(tool_call_parser="hermes2")
    message = str(raised.value)
    assert "unknown tool-call parser 'hermes2'" in message
    assert "llama3_json" in message
    assert "kimi_k2" in message


def test_every_vllm_parser_name_is_taken() -> None:
    from oai_server.engine.vllm.parsing import tool_parser_names

    assert len(tool_parser_names()) >= 50
    for name in tool_parser_names():
        assert Settings(tool_call_parser=name).tool_call_parser == name


@pytest.mark.parametrize(
    "argv",
    [
        ["--tool-call-parser", "pythonic"],
        ["serve", "org/model", "--served-model-name", MODEL, "--enable-auto-tool-choice",
         "--tool-call-parser", "pythonic"],
    ],
    ids=["ours", "vllm-serve"],
)  # fmt: skip
def test_a_tool_call_parser_named_on_the_command_line_reads_the_calls(
    argv: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A Llama 3 model, whose own parser (llama3_json) would leave this pythonic call as
    text: the answer's call is the named parser's reading, command line to served model."""
    from oai_server.app import create_app
    from oai_server.cli import parse_command_line
    from oai_server.engine.vllm.holder import VLLMTokenizer
    from tests.conformance import checked_post
    from tests.live import serve as serve_live
    from tests.unit.tool_families import TOOLS, pieces

    settings = parse_command_line(argv).settings
    llama = family_tokenizer(next(f for f in FAMILIES if f.name == "llama-3"))
    call = pieces(llama, '[get_weather(city="Oslo")]')
    engine = FakeEngine(tokens=call, model_tokenizer=VLLMTokenizer(llama))
    with caplog.at_level(logging.INFO), serve_live(create_app(settings, engine)) as root:
        reply = checked_post(f"{root}/v1/chat/completions", json=chat_body(tools=TOOLS))
    assert reply.status_code == 200, reply.text
    (made,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert (made["function"]["name"], made["function"]["arguments"]) == (
        "get_weather",
        '{"city": "Oslo"}',
    )
    assert f"{MODEL}: tool calls: pythonic" in caplog.text


async def test_a_models_dialect_is_detected_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One detection per model, at start: chat requests, streamed or not, with tools or
    not, and /tokenize all read the model with the dialect resolved then."""
    from oai_server.dialects import model
    from tests.unit.tool_families import TOOLS

    seen: list[ModelTraits] = []

    def counted(traits: ModelTraits) -> Dialect | None:
        seen.append(traits)
        return detect(traits)

    monkeypatch.setattr(model, "detect", counted)
    async with serve(FakeEngine()) as client:
        assert len(seen) == 1  # the ready line's
        for body in (chat_body(), chat_body(stream=True), chat_body(tools=TOOLS)):
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        tokens = await client.post("/tokenize", json={"model": MODEL, "messages": [HELLO]})
        assert tokens.status_code == 200
    assert len(seen) == 1


async def test_a_named_reasoning_parser_the_tokenizer_cannot_serve_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Mistral's parser needs `[THINK]` in the vocabulary: checked once at start, a warning,
    and the answers are content (each request used to fail with a 500)."""
    with caplog.at_level(logging.WARNING):
        async with serve(FakeEngine(reply="Four."), reasoning_parser="mistral") as client:
            reply = await client.post("/v1/chat/completions", json=chat_body())
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "Four."
    assert "reasoning parser mistral not used" in caplog.text
