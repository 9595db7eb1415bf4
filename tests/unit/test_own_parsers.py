"""Our own streaming parsers give what vLLM's parser gives token by token, at a piece's cost.

Qwen3-Coder answers are put together at random (a fixed seed) from the shapes that matter:
text before a call, several calls, several parameters, values holding newlines, quotes,
backslashes, `<` and non-ASCII letters, a parameter the schema types as an integer, a
function the tools lack, and malformed ones (a call cut anywhere, text after a call, a tag
inside a value). Each is streamed through the server's parsing (our parser behind the
gate) in pieces of 1 to 16 tokens at random, and the sum a client makes of it must equal
vLLM's `qwen3_coder` parser fed the same answer one token at a time.
"""

from __future__ import annotations

import functools
import random

import pytest

from oai_server.dialects.tool_calls.own import streaming_parser
from oai_server.dialects.tool_calls.parsers import EngineCalls
from oai_server.dialects.tool_calls.plan import markers_of_parsing
from oai_server.dialects.tool_calls.qwen3_coder import Qwen3CoderCalls
from oai_server.engine.vllm.parsing import VLLMOutputParsing
from oai_server.services.chat_choice import ChoiceState
from tests.unit.test_parser_gate import Summed, _cut, _stream, _tokens
from tests.unit.tool_families import FAMILIES, TOOLS, Family, family_tokenizer

SEED = 55
ANSWERS = 48
CUTS = 3
QWEN3_CODER = next(f for f in FAMILIES if f.parser == "qwen3_coder")
COUNT = {
    "type": "function",
    "function": {
        "name": "count_items",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
}
REQUEST = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [*TOOLS, COUNT],
}
VALUES = [
    "Oslo",
    "\nOslo\n",
    "\n\nOslo\n\n",
    "if a < b and c > d:\n    return a",
    "x <div> y </p>",
    'a "quote" and a \\ backslash',
    "Ünïcödé ✓ 東京",
    "",
    "<",
    "a\tb",
]
# (function, its parameter): string-typed, string-typed, integer-typed, a function not in
# the tools (no schema: its values stay strings).
FUNCTIONS = [("get_weather", "city"), ("get_time", "zone"), ("count_items", "n"), ("free", "x")]


def _parameter(key: str, value: str) -> str:
    return f"<parameter={key}>\n{value}\n</parameter>\n"


def _call(rng: random.Random) -> str:
    name, key = rng.choice(FUNCTIONS)
    parameters = _parameter(key, rng.choice(VALUES))
    if name == "free" and rng.random() < 0.5:
        parameters += _parameter("y", rng.choice(VALUES))
    return f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"


def _answer(rng: random.Random) -> str:
    lead = rng.choice(["", "", "Let me check. ", "\n\n", "a < b. "])
    calls = [_call(rng) for _ in range(rng.randint(1, 3))]
    text = lead + rng.choice(["\n", ""]).join(calls)
    ending = rng.random()
    if ending < 0.2:  # cut anywhere: a call (or a tag) never closed
        text = text[: rng.randint(1, len(text))]
    elif ending < 0.35:
        text += rng.choice([" Done, it is mild.", "\nDone.", "\n"])
    elif ending < 0.45:  # a tag inside a value
        text = text.replace("\n</parameter>", " <parameter=z> </function>\n</parameter>", 1)
    return text


def _parsing() -> VLLMOutputParsing:
    return VLLMOutputParsing(QWEN3_CODER.parser, family_tokenizer(QWEN3_CODER))


def _ours(family: Family) -> tuple[ChoiceState, Qwen3CoderCalls]:
    parsing = _parsing()
    own = streaming_parser(parsing, REQUEST, markers_of_parsing(parsing))
    assert isinstance(own, Qwen3CoderCalls)
    calls = EngineCalls(own, whole=False, parallel=True, markers=markers_of_parsing(parsing))
    return ChoiceState(calls), own


def _vllms(family: Family) -> ChoiceState:
    return ChoiceState(EngineCalls(_parsing().new(REQUEST), whole=False, parallel=True))


def _whole_tokens(text: str) -> bool:
    """Whether each token of `text` decodes to whole characters (a letter split across
    tokens streams once it is whole, which is the engine's business, not a parser's)."""
    tokenizer = family_tokenizer(QWEN3_CODER)
    ids = tokenizer.encode(text, add_special_tokens=False)
    return "".join(tokenizer.decode([i]) for i in ids) == text


@functools.cache
def _answers() -> list[str]:
    """The answers of the test, made once (not at collection: they need the tokenizer)."""
    rng = random.Random(SEED)
    answers: list[str] = []
    while len(answers) < ANSWERS:
        text = _answer(rng)
        if _whole_tokens(text):
            answers.append(text)
    return answers


@pytest.mark.parametrize("number", range(ANSWERS))
def test_qwen3_coder_streamed_in_pieces_is_vllms_answer_token_by_token(number: int) -> None:
    text = _answers()[number]
    tokens = _tokens(QWEN3_CODER, text, by_chars=False)
    expected = _stream(_vllms(QWEN3_CODER), [(t, i, 1) for t, i in tokens])
    choice, _ = _ours(QWEN3_CODER)
    assert _stream(choice, [(t, i, 1) for t, i in tokens]) == expected
    rng = random.Random(f"{SEED}-{text}")
    for _ in range(CUTS):
        deltas = _cut(tokens, rng)
        choice, _ = _ours(QWEN3_CODER)
        got = _stream(choice, deltas)
        # vLLM's parser drops whitespace after a call only where it is a piece of its own
        # (`\nDone.` in one piece stays whole): there, what it gives for the same pieces.
        same_pieces = _stream(_vllms(QWEN3_CODER), deltas)
        assert got == (expected if same_pieces == expected else same_pieces), [d[0] for d in deltas]


WELL_FORMED = [
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
        + " tok" * 200
        + "\n</parameter>\n</function>\n</tool_call>",
        id="one long call",
    ),
    pytest.param(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + " tok" * 200 + "\n</param",
        id="one long call cut by max_tokens",
    ),
    pytest.param(
        "Let me check. <tool_call>\n<function=free>\n"
        + _parameter("x", 'if a < b:\n    print("café \\ ")')
        + _parameter("y", "<div>\n\n")
        + "</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
        + _parameter("zone", "CET")
        + "</function>\n</tool_call>",
        id="text, two calls, code in values",
    ),
]


@pytest.mark.parametrize("text", WELL_FORMED)
def test_qwen3_coder_reads_well_formed_calls_without_vllms_parser(text: str) -> None:
    """The calls a model writes are ours to read: vLLM's parser is never made."""
    tokens = _tokens(QWEN3_CODER, text, by_chars=False)
    expected = _stream(_vllms(QWEN3_CODER), [(t, i, 1) for t, i in tokens])
    for deltas in ([(t, i, 1) for t, i in tokens], _cut(tokens, random.Random(SEED))):
        choice, own = _ours(QWEN3_CODER)
        assert _stream(choice, deltas) == expected
        assert own._engine is None, "handed over to vLLM's parser"
    assert isinstance(expected, Summed)
    assert expected.calls
