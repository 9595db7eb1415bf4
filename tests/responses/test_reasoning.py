"""Reasoning in the Responses API: a `reasoning` item before the message, its stream
events, its token count, and reasoning items given back in later turns.

The raw output is SIMPLE_REASONING of vLLM's own DeepSeek-R1 parser tests (see
tests/unit/test_reasoning.py), streamed by the fake engine through vLLM's parser.
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve
from tests.store.conftest import MODEL, sdk
from tests.unit.test_reasoning import THINK, pieces, vllm_split

TEXT = "This is a reasoning section</think>This is the rest"
# Shows each turn's thinking as the template receives it (vLLM's `reasoning_content`).
TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning_content %}[thought:{{ m.reasoning_content }}]{% endif %}"
    "{{ m.content }}\n{% endfor %}<|assistant|>"
)


def engine(text: str = TEXT) -> FakeEngine:
    return FakeEngine(tokens=pieces(text), added_tokens=THINK, chat_template=TEMPLATE)


def app(fake: FakeEngine, **settings: object) -> object:
    return create_app(Settings(reasoning_parser="deepseek_r1", **settings), fake)  # type: ignore[arg-type]


def prompt(fake: FakeEngine) -> str:
    return fake.tokenizer.decode(fake.calls[-1].prompt_token_ids)


def test_reasoning_item_before_the_message_whole_and_streamed() -> None:
    reasoning, content = vllm_split(TEXT)
    with serve(app(engine())) as base, sdk(base) as client:
        whole = client.responses.create(model=MODEL, input="Hi")
        events = list(client.responses.create(model=MODEL, input="Hi", stream=True))
    thought, message = whole.output
    assert thought.type == "reasoning"
    assert thought.id.startswith("rs_")
    assert thought.summary == []
    assert [(c.type, c.text) for c in thought.content or ()] == [("reasoning_text", reasoning)]
    assert message.type == "message"
    assert whole.output_text == content
    assert whole.usage is not None
    # Each step before the closing tag put its text in the thinking (docs/api/chat.md).
    thinking_steps = pieces(TEXT).index("</think>")
    assert whole.usage.output_tokens_details.reasoning_tokens == thinking_steps > 0

    kinds = [e.type for e in events]
    deltas = kinds.count("response.reasoning_text.delta")
    assert kinds[: 4 + deltas] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.reasoning_text.delta"] * deltas,
    ]
    assert kinds[4 + deltas : 8 + deltas] == [
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    thinking = [e for e in events if e.type.startswith("response.reasoning_text")]
    assert {(e.output_index, e.content_index) for e in thinking} == {(0, 0)}  # type: ignore[union-attr]
    assert "".join(e.delta for e in thinking[:-1]) == reasoning  # type: ignore[union-attr]
    assert thinking[-1].text == reasoning  # type: ignore[union-attr]
    texts = [e for e in events if e.type == "response.output_text.delta"]
    assert {e.output_index for e in texts} == {1}  # type: ignore[union-attr]
    final = events[-1].response  # type: ignore[union-attr]
    assert [o.model_dump(exclude={"id"}) for o in final.output] == [
        o.model_dump(exclude={"id"}) for o in whole.output
    ]
    assert final.usage == whole.usage


def test_reasoning_items_given_back_reach_the_template(tmp_path: Path) -> None:
    fake = engine()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve(app(fake, store_url=store)) as base, sdk(base) as client:
        first = client.responses.create(model=MODEL, input="Hi")
        client.responses.create(model=MODEL, previous_response_id=first.id, input="And?")
        remembered = prompt(fake)
        sent_back = [o.model_dump(exclude_none=True) for o in first.output]
        client.responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": "Hi"},
                *sent_back,
                {"role": "user", "content": "And?"},
            ],
            store=False,
        )
        assert prompt(fake) == remembered
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(
                model=MODEL,
                input=[{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}],
            )
    # One assistant turn: its thinking (for the template to keep or drop) and its answer.
    assert "<|assistant|>[thought:This is a reasoning section]This is the rest\n" in remembered
    assert remembered.count("<|assistant|>") == 2
    assert refused.value.body["param"] == "input[0].encrypted_content"  # type: ignore[index]
