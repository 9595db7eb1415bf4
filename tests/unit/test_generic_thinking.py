"""A model that thinks between `<think>` and `</think>` but shows no family's markers (QwQ,
Phi-4-reasoning, OpenThinker, a distill of R1's lineage) is served as a thinking model
without `--reasoning-parser`.

Its templates here follow the published ones in what detection reads: QwQ's opens
`<think>` in its generation prompt and keeps only what follows `</think>` of an earlier
answer (R1's rule); Phi-4-reasoning's asks for the tags in its system message; an
OpenThinker-like Qwen2.5 template shows nothing, the tags being among its tokens. The
fake engine streams the model's raw text through the real server, over the embedded
model's tokenizer with the tags added (as the engine hands it over).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest

from oai_server.dialects.detect import Dialect, ModelTraits, detect
from oai_server.dialects.reasoning.tags import TagsDelta, ThinkTags
from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from tests.unit.conftest import MODEL, chat_body, serve
from tests.unit.streamed_chat import sum_of_stream
from tests.unit.tool_families import _embedded_dir, pieces

THINK = ("<think>", "</think>")
_TURNS = (
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
)
QWQ = (
    "{%- for m in messages %}{%- set content = m.content %}"
    "{%- if m.role == 'assistant' %}{%- set content = content.split('</think>')[-1] %}"
    "{%- endif %}{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)
PHI4_REASONING = (
    "{{- '<|im_start|>system<|im_sep|>You are Phi. Structure your response into two "
    "sections, Thought and Solution: <think> {Thought section} </think> {Solution "
    "section}.<|im_end|>' }}"
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '<|im_sep|>' + m.content + "
    "'<|im_end|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant<|im_sep|>' }}{%- endif %}"
)
OPENTHINKER = (
    _TURNS + "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# tests/integration/test_reasoning.py's copy of the embedded model: R1's rule only.
R1_COPY = (
    "{% for message in messages %}{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

GENERIC = "generic-think"


@pytest.mark.parametrize(
    ("template", "tokens", "parser"),
    [
        pytest.param(QWQ, (), "deepseek_r1", id="qwq: opens <think>, R1's history rule"),
        pytest.param(R1_COPY, THINK, "deepseek_r1", id="r1 copy: R1's history rule"),
        pytest.param(PHI4_REASONING, THINK, "think", id="phi-4-reasoning: the tags asked for"),
        pytest.param(OPENTHINKER, THINK, "think", id="openthinker: the tags as tokens"),
    ],
)
def test_a_generic_thinking_model_is_recognised(
    template: str, tokens: tuple[str, ...], parser: str
) -> None:
    assert detect(ModelTraits(template, frozenset(tokens))) == Dialect(GENERIC, None, parser)


def test_a_template_that_only_names_one_tag_is_no_thinking_model() -> None:
    assert detect(ModelTraits(OPENTHINKER + "{# <think> #}")) is None


@functools.cache
def _tokenizer(template: str) -> Any:
    from transformers import AutoTokenizer
    from vllm.tokenizers.hf import get_cached_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(_embedded_dir())
    tokenizer.add_tokens(list(THINK))
    tokenizer.chat_template = template
    return get_cached_tokenizer(tokenizer)


def _engine(template: str, text: str) -> FakeEngine:
    tokenizer = _tokenizer(template)
    return FakeEngine(tokens=pieces(tokenizer, text), model_tokenizer=VLLMTokenizer(tokenizer))


async def _answers(engine: FakeEngine, **settings: Any) -> tuple[dict[str, Any], Any]:
    async with serve(engine, **settings) as client:
        whole = await client.post("/v1/chat/completions", json=chat_body())
        streamed = await client.post("/v1/chat/completions", json=chat_body(stream=True))
    assert whole.status_code == streamed.status_code == 200, whole.text
    return whole.json()["choices"][0]["message"], sum_of_stream(streamed.text)


@pytest.mark.parametrize(
    ("template", "text"),
    [
        pytest.param(PHI4_REASONING, "<think>Two and two.</think>Four.", id="tags: both written"),
        pytest.param(QWQ, "Two and two.\n</think>\n\nFour.", id="r1: the prompt opened it"),
    ],
)
async def test_the_thinking_comes_back_apart_without_a_flag(template: str, text: str) -> None:
    message, streamed = await _answers(_engine(template, text))
    assert message["reasoning"].strip() == "Two and two."
    assert message["content"].strip() == "Four."
    assert (streamed.reasoning, streamed.content) == (message["reasoning"], message["content"])


async def test_an_answer_without_the_tags_stays_content() -> None:
    """Where R1's parser would make it all thinking: the model wrote no `<think>`."""
    message, streamed = await _answers(_engine(PHI4_REASONING, "Four."))
    assert message["content"] == "Four."
    assert message.get("reasoning") is None
    assert (streamed.reasoning, streamed.content) == ("", "Four.")


async def test_the_flags_still_win() -> None:
    message, _ = await _answers(
        _engine(PHI4_REASONING, "<think>Two and two.</think>Four."), reasoning_parser="none"
    )
    assert message["content"] == "<think>Two and two.</think>Four."


@pytest.mark.parametrize(
    ("template", "named"),
    [
        (PHI4_REASONING, "tool calls: hermes (built-in), reasoning: think (built-in)"),
        (QWQ, "tool calls: hermes (built-in), reasoning: deepseek_r1"),
    ],
)
async def test_the_ready_line_names_the_reasoning_parser(
    template: str, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="oai_server.app"):
        async with serve(_engine(template, "Four.")):
            pass
    assert f"{MODEL}: {named} ({GENERIC})" in caplog.text


async def test_the_tags_reach_the_parser_where_they_are_special_tokens() -> None:
    """The built-in parser reads the tags in the text: the engine is asked to keep them."""
    engine = _engine(PHI4_REASONING, "Four.")
    async with serve(engine) as client:
        await client.post("/v1/chat/completions", json=chat_body())
    assert engine.calls[-1].options.skip_special_tokens is False


@pytest.mark.parametrize(
    "deltas",
    [
        ["<think>", "Two", " and two.", "</think>", "Four."],
        ["<th", "ink>Two and", " two.</th", "ink>Fo", "ur."],
        ["<think>Two and two.</think>Four."],
    ],
    ids=["a tag per delta", "tags split across deltas", "all at once"],
)
def test_the_tags_parser_streams_what_it_reads_whole(deltas: list[str]) -> None:
    parser, reasoning, content = ThinkTags(), "", ""
    for delta in deltas:
        message = parser.extract_reasoning_streaming("", "", delta, [], [], [])
        if message is not None:
            reasoning += message.reasoning or ""
            content += message.content or ""
    assert (reasoning, content) == ("Two and two.", "Four.")
    assert ThinkTags().extract_reasoning("".join(deltas), None) == ("Two and two.", "Four.")


def test_text_that_only_looks_like_a_tag_is_content() -> None:
    parser = ThinkTags()
    held = parser.extract_reasoning_streaming("", "", "a <th", [], [], [])
    rest = parser.extract_reasoning_streaming("", "", "is", [], [], [])
    assert (held, rest) == (TagsDelta(content="a "), TagsDelta(content="<this"))


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        ("<think>Two and two.</think>Four is x <", "Two and two.", "Four is x <"),
        ("<think>Two and two </th", "Two and two </th", ""),
    ],
    ids=["the answer ends on a '<'", "the thinking ends on half its end tag"],
)
async def test_a_stream_that_ends_on_part_of_a_tag_keeps_it(
    text: str, reasoning: str, content: str
) -> None:
    """The parser holds back a possible tag at the end of each delta; the stream's end
    gives it back, so the streamed answer is the whole one."""
    message, streamed = await _answers(_engine(PHI4_REASONING, text))
    assert (message.get("reasoning") or "", message["content"] or "") == (reasoning, content)
    assert (streamed.reasoning, streamed.content) == (reasoning, content)
