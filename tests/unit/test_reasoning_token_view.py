"""Every vLLM reasoning parser reads the stage's views of the ids as it reads lists.

The reasoning stage hands vLLM's parsers the ids so far as views of one growing record
(`oai_server.engine.token_ids`), not as a fresh list per delta as `vllm serve` does. Each
parser in vLLM's registry streams the same answers both ways, token by token, and every
delta's split must be the same: what the parser makes of plain lists is what a client
gets from `vllm serve --reasoning-parser NAME`.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from oai_server.dialects.reasoning.stage import ReasoningStage, Split
from oai_server.engine.token_ids import TokenIds
from oai_server.engine.vllm.reasoning import reasoning_parser_class, reasoning_parser_names
from tests.unit.tool_families import _embedded_dir

# The tags of the registry's families, each one token (as in the family's vocabulary).
TAGS = (
    ("<think>", "</think>"),
    ("[THINK]", "[/THINK]"),
    ("<seed:think>", "</seed:think>"),
    ("<mm:think>", "</mm:think>"),
    ("<ifm|think>", "</ifm|think>"),
)
EXTRA = ("<ifm|tool_calls>", "<assistant>", "<tool_call>", "</tool_call>")
# Parsers that need more of a model than tags (its tokenizer's metadata, a tool-call
# token of its own format): vLLM refuses to make them over this tokenizer at all.
NEEDS_MORE = {
    "hf": "a response_template in the tokenizer's configuration",
    "mistral": "Mistral's tekken tokenizer",
}
THINKING_ON = {"thinking": True, "enable_thinking": True}
# A family's own markers where the parser has no `<think>`-like tag attributes, and the
# chat template kwargs under which it thinks at all (as `vllm serve` hands them over).
MARKERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gemma4": ("<|channel>", "<channel|>", {}),
    "granite": ("Here is my thought process:", "Here is my response:", {}),
    "seed_oss": ("<seed:think>", "</seed:think>", {}),
    "muse_glimmer": ("to=self<|message|>", "<|eom|>to=user<|message|>", {}),
    "kimi_k3": ("<|open|>think<|sep|>", "<|close|>think<|sep|>", {}),
    "deepseek_v3": ("<think>", "</think>", THINKING_ON),
    "hy_v3": ("<think>", "</think>", {"reasoning_effort": "high"}),
    "poolside_v1": ("<think>", "</think>", THINKING_ON),
}
# What a parser raises, both ways alike, and nothing else may be raised: gpt-oss's streams
# nothing (harmony is read apart), Hunyuan A13B's takes one token a delta only.
RAISES: dict[str, type[Exception]] = {
    "openai_gptoss": NotImplementedError,
    "hunyuan_a13b": AssertionError,
}
# Parsers that split none of the answers here, and why: the test holds that they still do
# not, so a vLLM upgrade that makes one split is noticed.
NO_SPLIT = {
    "openai_gptoss": "harmony's channels are read by the harmony stage, not this parser",
    "hunyuan_a13b": "its tags are fixed token ids of Hunyuan's own vocabulary",
    "cohere_command3": "vLLM reads Command's thinking in its unified parser; this one only "
    "says where reasoning ends",
    "cohere_command4": "as cohere_command3",
    "inkling": "an adapter over vLLM's unified Inkling parser, as cohere_command3",
    "plamo3": "an adapter over vLLM's unified PLaMo 3 parser: everything is reasoning here",
    "minimax_m2_append_think": "it hands the thinking on inside the content, by design",
}


@functools.cache
def tokenizer() -> Any:
    from transformers import AutoTokenizer
    from vllm.tokenizers.hf import get_cached_tokenizer

    tok = AutoTokenizer.from_pretrained(_embedded_dir())
    tok.add_special_tokens(
        {"additional_special_tokens": [t for pair in TAGS for t in pair] + list(EXTRA)}
    )
    return get_cached_tokenizer(tok)  # as the engine hands it over: its vocabulary read once


def answers(start: str, end: str) -> list[str]:
    return [
        f"{start}Two and two: four.\nSo four.{end}The answer is 4.",
        f"Two and two: four.{end}The answer is 4.",  # as R1's distills: no opening tag
        f"{start}Still thinking about it",  # never ends
        f"{start}a{end}b{start}c{end}d",  # a second block
        "No thinking at all.",
    ]


def deltas(text: str, size: int) -> list[tuple[str, list[int]]]:
    """`text` streamed `size` tokens a delta (more than one where the reader lags), each
    delta's text and ids."""
    tok = tokenizer()
    ids = tok.encode(text, add_special_tokens=False)
    out, before = [], ""
    for end in range(size, len(ids) + size, size):
        now = tok.decode(ids[:end])
        out.append((now[len(before) :], ids[end - size : end]))
        before = now
    assert "".join(piece for piece, _ in out) == text
    return out


def markers(name: str) -> tuple[str, str]:
    if name in MARKERS:
        return MARKERS[name][:2]
    parser = made(name)
    for start_attr, end_attr in (("start_token", "end_token"), ("think_start", "think_end")):
        start, end = getattr(parser, start_attr, None), getattr(parser, end_attr, None)
        if isinstance(start, str) and isinstance(end, str):
            return start, end
    return TAGS[0]


def by_lists(parser: Any, parts: list[tuple[str, list[int]]]) -> list[Split]:
    """Each delta's split as vLLM's parser makes it of plain lists, as `vllm serve` feeds it."""
    out: list[Split] = []
    text, ids = "", list[int]()
    for piece, piece_ids in parts:
        previous_text, previous_ids = text, list(ids)
        text, ids = text + piece, ids + piece_ids
        message = parser.extract_reasoning_streaming(
            previous_text, text, piece, previous_ids, list(ids), piece_ids
        )
        out.append(
            Split("", "")
            if message is None
            else Split(message.reasoning or "", message.content or "")
        )
    return out


def by_stage(stage: ReasoningStage, parts: list[tuple[str, list[int]]]) -> list[Split]:
    return [stage.feed(piece, piece_ids, len(piece_ids)) for piece, piece_ids in parts]


def made(name: str) -> Any:
    kwargs = MARKERS[name][2] if name in MARKERS else {}
    try:
        return reasoning_parser_class(name)(tokenizer(), chat_template_kwargs=kwargs)
    except (RuntimeError, ValueError, KeyError):
        return None


MADE = [name for name in reasoning_parser_names() if name not in NEEDS_MORE]


def test_the_parsers_that_need_more_are_still_not_made_over_tags() -> None:
    for name in NEEDS_MORE:
        assert made(name) is None, f"{name} is made over the tags now: take it off NEEDS_MORE"


@pytest.mark.parametrize("name", MADE)
def test_each_parser_splits_the_views_as_it_splits_lists(name: str) -> None:
    raised = set()
    for text in answers(*markers(name)):
        for size in (1, 3):
            parts = deltas(text, size)
            expected = outcome(name, by_lists, made(name), parts)
            got = outcome(name, by_stage, ReasoningStage(made(name)), parts)
            assert got == expected, (text, size)
            if isinstance(got, type):
                raised.add(got)
    assert raised == ({RAISES[name]} if name in RAISES else set())


def outcome(name: str, run: Any, *args: Any) -> Any:
    """What `run` returns, or the kind of error it raises where `RAISES` expects it (any
    other error fails the test): such parsers must fail the same way fed views."""
    if name not in RAISES:
        return run(*args)
    try:
        return run(*args)
    except RAISES[name] as exc:
        return type(exc)


@pytest.mark.parametrize("name", MADE)
def test_each_parser_splits_its_familys_thinking_from_the_answer(name: str) -> None:
    """Fed views, each parser finds its family's markers: the thinking apart, the answer
    after it, as `vllm serve --reasoning-parser NAME` splits them."""
    parts = deltas(answers(*markers(name))[0], 1)
    splits = outcome(name, by_stage, ReasoningStage(made(name)), parts)
    reasoning = "" if isinstance(splits, type) else "".join(s.reasoning for s in splits)
    content = "" if isinstance(splits, type) else "".join(s.content for s in splits)
    split = (
        reasoning.endswith("Two and two: four.\nSo four.")
        and content.endswith("The answer is 4.")
        and "So four." not in content
    )
    if name in NO_SPLIT:
        assert not split, f"{name} splits now: take it off NO_SPLIT"
    else:
        assert split, (reasoning, content)


def test_a_view_reads_as_the_list_of_its_length() -> None:
    record = TokenIds()
    record.extend([5, 7, 5])
    before = record.view()
    record.extend([9, 5])
    after = record.view()
    assert list(before) == [5, 7, 5]
    assert list(after) == [5, 7, 5, 9, 5]
    assert (len(before), len(after), len(record)) == (3, 5, 5)
    assert [9 in before, 9 in after, 4 in after] == [False, True, False]
    assert (before.count(5), after.count(5), after.count(4)) == (2, 3, 0)
    assert (before[-1], after[-1], after[-2], before[0]) == (5, 5, 9, 5)
    assert (before[1:], after[::-1]) == ([7, 5], [5, 9, 5, 7, 5])
    assert (after.index(9), after.index(5, 1)) == (3, 2)
    with pytest.raises(ValueError, match="not in list"):
        before.index(9)
    for beyond in (3, -4):
        with pytest.raises(IndexError):
            before[beyond]
    assert before == [5, 7, 5]
    assert before != after
    assert before + [1] == [5, 7, 5, 1]  # noqa: RUF005 - the `+` vLLM's parsers use
