"""vLLM's parsers called only where a marker can be: the same answer as token by token.

Each family's raw answers (`tests.unit.tool_families`, `tests.unit.thinking_families`)
and malformed ones (a call that never closes, text after a call, a marker inside an
argument, thinking that never ends, tags cut across deltas) are streamed through a
choice's parsers in deltas of 1 to 16 tokens at random (a fixed seed), as a multi-token
step or `--stream-interval` brings them, with the gate on (`oai_server.dialects.gate`).
What comes out, summed as a client sums it, and the message it makes, must equal vLLM's
parser fed the same answer one token at a time (the gate off). A family whose parser
cannot take a delta of several tokens is fed every delta (`gate.PER_TOKEN`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from oai_server.dialects.gate import EVERY_DELTA, PER_TOKEN
from oai_server.dialects.reasoning.selection import choose
from oai_server.dialects.reasoning.stage import Reasoning, ReasoningStage
from oai_server.dialects.tool_calls.own import streaming_parser
from oai_server.dialects.tool_calls.parsers import (
    CallArguments,
    CallStart,
    Content,
    EngineCalls,
)
from oai_server.dialects.tool_calls.plan import markers_of_parsing
from oai_server.engine.types import ChoiceDelta
from oai_server.engine.vllm.holder import VLLMTokenizer
from oai_server.engine.vllm.parsing import VLLMOutputParsing
from oai_server.services.chat_choice import ChoiceState
from oai_server.services.events import ArgumentsDelta, ReasoningDelta
from tests.unit.thinking_families import REASONING, THINKERS, Thinker
from tests.unit.tool_families import FAMILIES, LEAD, PLAIN, TOOLS, Family, family_tokenizer, pieces

ROUNDS = 6  # random cuttings of each answer
SEED = 55


@dataclass
class Summed:
    reasoning: str = ""
    content: str = ""
    calls: dict[int, list[str]] = field(default_factory=dict)

    def add(self, events: Sequence[Any]) -> None:
        for event in events:
            if isinstance(event, Content):
                self.content += event.text
            elif isinstance(event, CallStart):
                assert event.index not in self.calls
                self.calls[event.index] = [event.name, ""]
            elif isinstance(event, CallArguments):
                self.calls[event.index][1] += event.text
            else:
                self.reasoning += event.text


def _parsing(family: Family) -> VLLMOutputParsing:
    return VLLMOutputParsing(family.parser, family_tokenizer(family))


def _choice(family: Family, thinker: Thinker | None, gated: bool) -> ChoiceState:
    parsing = _parsing(family)
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    markers = markers_of_parsing(parsing) if gated else EVERY_DELTA
    # Gated, as the server reads it: our own parser where the family has one.
    text_parser = streaming_parser(parsing, request, markers) if gated else parsing.new(request)
    calls = EngineCalls(text_parser, whole=False, parallel=True, markers=markers)
    stage = None
    if thinker is not None:
        reasoner = choose(thinker.reasoning_parser, None, VLLMTokenizer(family_tokenizer(family)))
        assert reasoner is not None
        stage = reasoner.make(dict(thinker.template_kwargs))
        if not gated:
            stage = ReasoningStage(stage.parser)
    return ChoiceState(calls, reasoning=stage)


def _stream(choice: ChoiceState, deltas: list[tuple[str, list[int], int]]) -> Summed:
    """The choice's answer to `deltas`, each asked first whether it may pass the parsers
    (`ChoiceState.passing`), as a stream's light path asks."""
    summed = Summed()
    for text, ids, count in deltas:
        quiet = choice.passing(ChoiceDelta(0, text, count, token_ids=ids))
        if quiet is None:
            summed.add(choice.feed(text, ids, count))
        elif isinstance(quiet, ArgumentsDelta):
            summed.add([CallArguments(quiet.call, quiet.text)])
        elif isinstance(quiet, ReasoningDelta):
            summed.add([Reasoning(quiet.text)])
        else:
            summed.add([Content(quiet.text)])
    summed.add(choice.finish())
    assert choice.calls == len(summed.calls)
    return summed


def _cut(
    tokens: list[tuple[str, list[int]]], rng: random.Random
) -> list[tuple[str, list[int], int]]:
    """`tokens` in deltas of 1 to 16 tokens."""
    deltas, at = [], 0
    while at < len(tokens):
        size = rng.randint(1, 16)
        group = tokens[at : at + size]
        deltas.append(
            ("".join(t for t, _ in group), [i for _, ids in group for i in ids], len(group))
        )
        at += size
    return deltas


def _tokens(family: Family, text: str, by_chars: bool) -> list[tuple[str, list[int]]]:
    """`text` one token a piece, or (`by_chars`) in pieces of 1 to 3 characters, cutting
    the tags across deltas, each with the ids its text encodes to."""
    tokenizer = family_tokenizer(family)
    if by_chars:
        rng = random.Random(len(text))
        parts, at = [], 0
        while at < len(text):
            size = rng.randint(1, 3)
            parts.append(text[at : at + size])
            at += size
    else:
        parts = pieces(tokenizer, text)
    return [(p, tokenizer.encode(p, add_special_tokens=False)) for p in parts]


def _inside(family: Family) -> str:
    """The family's one call with a marker written inside its argument's value."""
    marker = family.tokens[0] if family.tokens else "[{"
    return family.one.replace("Oslo", f"Os{marker}lo")


def _tool_cases(family: Family) -> list[tuple[str, str, bool]]:
    one = family.one
    cases = [
        ("plain", PLAIN, False),
        ("one call", one, False),
        ("text after a call", one + " Done, it is mild.", False),
        ("a call never closed", one[: len(one) * 2 // 3], False),
        ("a marker inside an argument", _inside(family), False),
        ("a long plain argument", one.replace("Oslo", " ".join(["Oslo"] * 30)), False),
        ("tags cut across deltas", LEAD + one, True),
    ]
    if family.two is not None:
        cases.append(("two calls", family.two, False))
    if family.lead:
        cases.append(("text then a call", LEAD + one, False))
    return cases


def _thinking_cases(thinker: Thinker) -> list[tuple[str, str, bool]]:
    return [
        ("thinking then text", thinker.answer, False),
        ("thinking then a call", thinker.call, False),
        ("thinking never ended", thinker.opening + REASONING + " and more of it", False),
        ("thinking, a call, text", thinker.then(thinker.family.one + " Done."), False),
        ("thinking tags cut across deltas", thinker.answer, True),
    ]


CASES = [
    pytest.param(f, None, text, chars, id=f"{f.name}-{what}")
    for f in FAMILIES
    for what, text, chars in _tool_cases(f)
] + [
    pytest.param(t.family, t, text, chars, id=f"{t.name}-{what}")
    for t in THINKERS
    for what, text, chars in _thinking_cases(t)
]


# The families whose vLLM parsers give another answer for deltas of several tokens than for
# the same text token by token, gate or no gate (vLLM 0.32: `vllm serve --stream-interval
# 4` streams them so too): the Llama 3 JSON, Llama 4 pythonic, DeepSeek V3 and V3.1 and
# xLAM tool parsers, InternLM2's on tags cut across deltas, and the Granite reasoning
# parser. For them the gate's deltas of several tokens must give what vLLM's
# parser gives for the same deltas, and its one-token deltas what it gives token by token.
VLLM_SPLITS = {
    "llama-3",
    "llama-4",
    "deepseek-v3",
    "deepseek-v3.1",
    "xlam",
    "internlm",
    "deepseek-v3-thinking",
    "deepseek-v3.1-thinking",
    "granite-thinking",
}


@pytest.mark.parametrize(("family", "thinker", "text", "by_chars"), CASES)
def test_streamed_in_deltas_of_many_tokens_the_answer_is_vllms_token_by_token(
    family: Family, thinker: Thinker | None, text: str, by_chars: bool
) -> None:
    name = family.name if thinker is None else thinker.name
    tokens = _tokens(family, text, by_chars)
    one_by_one = [(t, i, 1) for t, i in tokens]
    expected = _stream(_choice(family, thinker, gated=False), one_by_one)
    assert _stream(_choice(family, thinker, gated=True), one_by_one) == expected
    rng = random.Random(f"{SEED}-{name}-{text}")
    for _ in range(ROUNDS):
        deltas = _cut(tokens, rng)
        got = _stream(_choice(family, thinker, gated=True), deltas)
        cuts = [d[0] for d in deltas]
        if name in VLLM_SPLITS:
            assert got == _stream(_choice(family, thinker, gated=False), deltas), cuts
        else:
            assert got == expected, cuts


def test_the_gate_passes_over_the_parser_where_no_marker_can_be() -> None:
    """The hermes parser is not asked about a call's plain argument text."""
    family = FAMILIES[0]
    assert family.parser not in PER_TOKEN
    text = family.one.replace("Oslo", " ".join(["word"] * 40))
    choice = _choice(family, None, gated=True)
    asked = 0
    parser = choice.parser
    assert isinstance(parser, EngineCalls)
    feed = parser.parser.feed

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal asked
        asked += 1
        return feed(*args, **kwargs)

    parser.parser.feed = counted  # type: ignore[method-assign]
    tokens = _tokens(family, text, False)
    summed = _stream(choice, [(t, i, 1) for t, i in tokens])
    assert summed.calls[0][0] == "get_weather"
    assert asked < len(tokens) / 2, f"asked {asked} times for {len(tokens)} tokens"
