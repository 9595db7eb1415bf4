"""Reasoning then an answer, and reasoning then a call, in each thinking family's dialect.

The fake engine streams the family's raw text (`tests.unit.thinking_families`) token by
token through the real server, whose `auto` settings pick both of the family's parsers
from its chat template and tokens. As `vllm serve --reasoning-parser R --tool-call-parser
T` does, the reasoning parser splits the thinking off first and the tool-call parser reads
the content after it. The reference is vLLM's own parser for the pair
(`vllm.parser.ParserManager.get_parser`, which runs `extract_reasoning`, then
`extract_tool_calls` on the content): its `parse` of the whole text for the whole answer,
its `parse_delta` fed the same tokens for the sum of the streamed deltas.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from tests.unit.conftest import chat_body, serve
from tests.unit.streamed_chat import sum_of_stream, sum_of_vllm_stream
from tests.unit.thinking_families import REASONING, THINKERS, Thinker
from tests.unit.tool_families import TOOLS, family_tokenizer, pieces

# (reasoning, content, [(name, arguments)])
Answer = tuple[str, str, list[tuple[str, Any]]]


def _body(thinker: Thinker, **overrides: Any) -> dict[str, Any]:
    kwargs = dict(thinker.template_kwargs)
    extra = {"chat_template_kwargs": kwargs} if kwargs else {}
    return chat_body(tools=TOOLS, **extra, **overrides)


def vllm_parser(thinker: Thinker, body: dict[str, Any]) -> tuple[Any, Any]:
    """vLLM's parser for the family's pair, made per request as `vllm serve` makes it."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    tokenizer = family_tokenizer(thinker.family)
    cls = ParserManager.get_parser(
        tool_parser_name=thinker.family.parser,
        reasoning_parser_name=thinker.reasoning_parser,
        enable_auto_tools=True,
        tokenizer=tokenizer,
    )
    assert cls is not None
    request = ChatCompletionRequest.model_validate(
        {k: body[k] for k in ("model", "messages", "tools")}
    )
    parser = cls(tokenizer, request.tools, chat_template_kwargs=dict(thinker.template_kwargs))
    return parser, request


def expected_whole(thinker: Thinker, body: dict[str, Any], text: str) -> Answer:
    parser, request = vllm_parser(thinker, body)
    ids = family_tokenizer(thinker.family).encode(text, add_special_tokens=False)
    reasoning, content, calls = parser.parse(
        text, request, enable_auto_tools=True, model_output_token_ids=ids
    )
    made = [(c.name, json.loads(c.arguments)) for c in calls or []]
    return reasoning or "", content or "", made


def expected_stream(thinker: Thinker, body: dict[str, Any], text: str) -> Answer:
    parser, request = vllm_parser(thinker, body)
    tokenizer = family_tokenizer(thinker.family)
    summed = sum_of_vllm_stream(parser, request, tokenizer, pieces(tokenizer, text))
    return summed.reasoning, summed.content, summed.calls


def expected_reasoning_tokens(thinker: Thinker, body: dict[str, Any], text: str) -> int:
    """vLLM's parser's own count over the answer's ids; where it counts none (a model that
    never writes the opening tag, a parser without a count of its own), each token that
    vLLM's stream puts in the thinking, as docs/api/chat.md says this server counts."""
    parser, request = vllm_parser(thinker, body)
    tokenizer = family_tokenizer(thinker.family)
    counted: int = parser.count_reasoning_tokens(tokenizer.encode(text, add_special_tokens=False))
    if counted:
        return counted
    parser, request = vllm_parser(thinker, body)
    return sum_of_vllm_stream(
        parser, request, tokenizer, pieces(tokenizer, text)
    ).reasoning_only_tokens


def _engine(thinker: Thinker, text: str) -> FakeEngine:
    tokenizer = family_tokenizer(thinker.family)
    return FakeEngine(tokens=pieces(tokenizer, text), model_tokenizer=VLLMTokenizer(tokenizer))


CASES = [
    pytest.param(t, text, id=f"{t.name}-{what}")
    for t in THINKERS
    for what, text in (("reasoning then an answer", t.answer), ("reasoning then a call", t.call))
]


@pytest.mark.parametrize(("thinker", "text"), CASES)
async def test_whole_answer_is_vllms(thinker: Thinker, text: str) -> None:
    body = _body(thinker)
    async with serve(_engine(thinker, text)) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    message = choice["message"]
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    answer = (message.get("reasoning") or "", message["content"] or "", calls)
    assert answer == expected_whole(thinker, body, text)
    assert REASONING in answer[0], f"{thinker.reasoning_parser} read no thinking in {text!r}"
    if text == thinker.call:
        assert calls, f"{thinker.family.parser} read no call after the thinking in {text!r}"
    assert choice["finish_reason"] == ("tool_calls" if calls else "stop")
    usage = reply.json()["usage"]["completion_tokens_details"]
    assert usage["reasoning_tokens"] == expected_reasoning_tokens(thinker, body, text) > 0


@pytest.mark.parametrize(("thinker", "text"), CASES)
async def test_streamed_deltas_add_up_to_vllms(thinker: Thinker, text: str) -> None:
    body = _body(thinker, stream=True, stream_options={"include_usage": True})
    async with serve(_engine(thinker, text)) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    summed = sum_of_stream(reply.text)
    answer: Answer = (summed.reasoning, summed.content, list(summed.calls))
    finish, usage = summed.finish, summed.usage or {}
    if thinker.vllm_streams_call or text != thinker.call:
        assert answer == expected_stream(thinker, body, text)
    else:  # vLLM's stream loses the call (see `Thinker.vllm_streams_call`): its whole answer
        vllm_reasoning, vllm_content, vllm_calls = expected_stream(thinker, body, text)
        assert not vllm_calls
        assert thinker.family.one in vllm_content
        reasoning, content, calls = answer
        made = [(name, json.loads(arguments)) for name, arguments in calls]
        assert (reasoning, content, made) == expected_whole(thinker, body, text)
        assert reasoning == vllm_reasoning
    assert REASONING in answer[0]
    calls = answer[2]
    if text == thinker.call:
        assert calls, f"{thinker.family.parser} streamed no call after the thinking"
        assert all(json.loads(arguments) for _, arguments in calls)
    assert finish == ("tool_calls" if calls else "stop")
    expected = expected_reasoning_tokens(thinker, body, text)
    assert usage["completion_tokens_details"]["reasoning_tokens"] == expected > 0


async def test_deepseek_v31_thinks_apart_only_when_asked() -> None:
    """Without `chat_template_kwargs: {"thinking": true}` vLLM's deepseek_v3 parser splits
    nothing off, per request: the whole text is the answer's content, as vLLM gives it."""
    (asked,) = [t for t in THINKERS if t.template_kwargs]
    unasked = dataclasses.replace(asked, template_kwargs=())
    body = _body(unasked)
    async with serve(_engine(unasked, unasked.answer)) as client:
        reply = await client.post("/v1/chat/completions", json=body)
    message = reply.json()["choices"][0]["message"]
    answer = (message.get("reasoning") or "", message["content"] or "", [])
    assert answer == expected_whole(unasked, body, unasked.answer)
    assert not answer[0]
    assert REASONING in answer[1]
