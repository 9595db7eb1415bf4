"""Thinking on a reasoning model: `thinking` blocks before the text, streamed as
`thinking_delta` and `signature_delta`, the request's `thinking` on the template's
switch, and earlier turns' thinking given back to the template.

The raw output is SIMPLE_REASONING of vLLM's own DeepSeek-R1 parser tests (see
tests/unit/test_reasoning.py), streamed by the fake engine through vLLM's parser.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import MODEL, client, server
from tests.unit.test_reasoning import THINK, pieces, vllm_split

TEXT = "This is a reasoning section</think>This is the rest"
HELLO: Any = [{"role": "user", "content": "Hi"}]
EVENT = TypeAdapter[Any](RawMessageStreamEvent)
# Shows the template's switch and each turn's thinking as the template receives it.
TEMPLATE = (
    "[thinking={{ enable_thinking }} effort={{ reasoning_effort }}]"
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning_content %}[thought:{{ m.reasoning_content }}]{% endif %}"
    "{{ m.content }}\n{% endfor %}<|assistant|>"
)


def engine() -> FakeEngine:
    return FakeEngine(tokens=pieces(TEXT), added_tokens=THINK, chat_template=TEMPLATE)


def prompt(fake: FakeEngine) -> str:
    return fake.tokenizer.decode(fake.calls[-1].prompt_token_ids)


def test_thinking_block_before_the_text_whole_and_streamed() -> None:
    reasoning, content = vllm_split(TEXT)
    body = {"model": MODEL, "max_tokens": 64, "messages": HELLO, "stream": True}
    with server(engine(), reasoning_parser="deepseek_r1") as root:
        sdk = client(root)
        whole = sdk.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            final = stream.get_final_message()
        with httpx.stream("POST", f"{root}/v1/messages", json=body) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    Message.model_validate(whole.model_dump())
    thought, text = whole.content
    assert thought.type == "thinking"
    assert thought.thinking == reasoning
    assert thought.signature
    assert (text.type, getattr(text, "text", None)) == ("text", content)
    assert whole.stop_reason == "end_turn"
    unsigned = {"id": True, "content": {0: {"signature"}}}
    assert final.model_dump(exclude=unsigned) == whole.model_dump(exclude=unsigned)
    assert final.content[0].signature  # type: ignore[union-attr]

    data = [json.loads(line[6:]) for line in lines]
    events = [EVENT.validate_python(d) for d in data if d["type"] != "ping"]
    kinds = [(e.type, getattr(getattr(e, "delta", None), "type", None)) for e in events]
    thinking = kinds.count(("content_block_delta", "thinking_delta"))
    assert (
        kinds[: 3 + thinking]
        == [
            ("message_start", None),
            ("content_block_start", None),
            *[("content_block_delta", "thinking_delta")] * thinking,
            ("content_block_delta", "signature_delta"),
        ][: 3 + thinking]
    )
    assert kinds[2 + thinking : 5 + thinking] == [
        ("content_block_delta", "signature_delta"),
        ("content_block_stop", None),
        ("content_block_start", None),
    ]
    assert events[1].content_block.model_dump() == {
        "type": "thinking",
        "thinking": "",
        "signature": "",
    }
    assert "".join(e.delta.thinking for e in events[2 : 2 + thinking]) == reasoning
    assert {e.index for e in events[1 : 4 + thinking]} == {0}
    assert events[4 + thinking].content_block.type == "text"


def test_thinking_setting_reaches_the_template_switch() -> None:
    fake = engine()
    with server(fake, reasoning_parser="deepseek_r1") as root:
        sdk = client(root)
        sdk.messages.create(model=MODEL, max_tokens=1500, messages=HELLO)
        default = prompt(fake)
        sdk.messages.create(
            model=MODEL,
            max_tokens=1500,
            messages=HELLO,
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
        enabled = prompt(fake)
        sdk.messages.create(
            model=MODEL, max_tokens=1500, messages=HELLO, thinking={"type": "disabled"}
        )
        disabled = prompt(fake)
    assert default.startswith("[thinking= effort=]")
    assert enabled.startswith("[thinking=True effort=]")
    assert disabled.startswith("[thinking=False effort=none]")


def test_earlier_thinking_goes_back_to_the_template_with_its_turn() -> None:
    fake = engine()
    with server(fake, reasoning_parser="deepseek_r1") as root:
        sdk = client(root)
        first = sdk.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        sdk.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[
                *HELLO,
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": "And?"},
            ],
        )
    assert (
        "<|assistant|>[thought:This is a reasoning section]This is the rest\n<|user|>And?"
        in prompt(fake)
    )
