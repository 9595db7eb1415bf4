"""Tool calls in each model family's own dialect, read by vLLM's parser for that family.

For each family the fake engine streams the family's raw output token by token (the
tokens of the embedded model's tokenizer with the family's special tokens added, so a
marker is one token, as in the family's own vocabulary) through the real server, which
recognises the family from its chat template and tokens (`--tool-call-parser auto`). The
whole answer must equal vLLM's parser's `parse` of the same text, and the sum of the
streamed deltas its `parse_delta` fed the same tokens, as `vllm serve` feeds them.

The families and their raw texts are in `tests.unit.tool_families`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from tests.unit.conftest import chat_body, serve
from tests.unit.streamed_chat import sum_of_stream, sum_of_vllm_stream
from tests.unit.tool_families import FAMILIES, LEAD, PLAIN, TOOLS, Family, family_tokenizer, pieces


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
    summed = sum_of_vllm_stream(parser, request, tokenizer, pieces(tokenizer, text))
    return summed.content, list(summed.calls)


def _texts(family: Family) -> list[tuple[str, str]]:
    texts = [("plain", PLAIN), ("one call", family.one)]
    if family.two is not None:
        texts.append(("two calls", family.two))
    if family.lead:
        texts.append(("text then a call", LEAD + family.one))
    return texts


CASES = [pytest.param(f, text, id=f"{f.name}-{what}") for f in FAMILIES for what, text in _texts(f)]


def _engine(family: Family, text: str) -> FakeEngine:
    tokenizer = family_tokenizer(family)
    return FakeEngine(tokens=pieces(tokenizer, text), model_tokenizer=VLLMTokenizer(tokenizer))


# The tool-call parser alone, as `vllm serve --tool-call-parser X` gives it: families that also
# think (GLM-4.5, MiniMax-M2, Seed-OSS) get their reasoning parser by `auto` otherwise.
@pytest.mark.parametrize(("family", "text"), CASES)
async def test_whole_answer_is_vllms(family: Family, text: str) -> None:
    body = chat_body(tools=TOOLS)
    engine = _engine(family, text)
    async with serve(engine, reasoning_parser="none") as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    # The parser reads markers that are special tokens: the engine must leave them in.
    assert [call.options.skip_special_tokens for call in engine.calls] == [False]
    message = reply.json()["choices"][0]["message"]
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    assert (message["content"] or "", calls) == expected_whole(family, body, text)
    if text != PLAIN:
        assert calls, f"{family.parser} read no call in {text!r}"
    if text == family.two:  # two calls indeed: parallel_tool_calls has one to drop
        assert [name for name, _ in calls] == ["get_weather", "get_time"]


@pytest.mark.parametrize(("family", "text"), CASES)
async def test_streamed_deltas_add_up_to_vllms(family: Family, text: str) -> None:
    body = chat_body(tools=TOOLS, stream=True)
    engine = _engine(family, text)
    async with serve(engine, reasoning_parser="none") as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert [call.options.skip_special_tokens for call in engine.calls] == [False]
    summed = sum_of_stream(reply.text)
    content, calls, finish = summed.content, summed.calls, summed.finish
    assert (content, calls) == expected_stream(family, body, text)
    if text != PLAIN and family.streams_calls:
        assert calls, f"{family.parser} streamed no call in {text!r}"
        assert all(json.loads(arguments) for _, arguments in calls)
    assert finish == ("tool_calls" if calls else "stop")


async def test_special_tokens_are_skipped_where_no_parser_reads_the_text() -> None:
    """Without tools (or with tool_choice none) the answer is text for the user, as vLLM
    gives it: the family's special tokens are left out."""
    family = FAMILIES[0]
    engine = _engine(family, PLAIN)
    async with serve(engine, reasoning_parser="none") as client:
        for body in (chat_body(), chat_body(tools=TOOLS, tool_choice="none")):
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
    assert [call.options.skip_special_tokens for call in engine.calls] == [True, True]


PARALLEL = [f for f in FAMILIES if f.two is not None]


@pytest.mark.parametrize("family", PARALLEL, ids=[f.name for f in PARALLEL])
async def test_parallel_tool_calls_false_keeps_the_first(family: Family) -> None:
    assert family.two is not None
    body = chat_body(tools=TOOLS, parallel_tool_calls=False)
    async with serve(_engine(family, family.two), reasoning_parser="none") as client:
        whole = await client.post("/v1/chat/completions", json=body)
        streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
    calls = whole.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    streamed_calls = sum_of_stream(streamed.text).calls
    names = [name for name, _ in streamed_calls]
    assert names == ["get_weather"] or (not family.streams_calls and not names)
