"""Reasoning in the Responses API: a `reasoning` item before the message, its stream
events, its token count, and reasoning items given back in later turns.

The raw output is SIMPLE_REASONING of vLLM's own DeepSeek-R1 parser tests (see
tests/unit/test_reasoning.py), streamed by the fake engine through vLLM's parser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.secret import ServerSecret
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
    assert 0 < whole.usage.output_tokens_details.reasoning_tokens < whole.usage.output_tokens

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


def _sealed_turn(client: openai.OpenAI, **extra: object) -> list[dict[str, object]]:
    """A stateless turn as Codex sends it; its output items as they would be sent back."""
    first = client.responses.create(
        model=MODEL,
        input="Hi",
        store=False,
        include=["reasoning.encrypted_content"],
        reasoning={"summary": "auto"},
        **extra,  # type: ignore[arg-type]
    )
    return [o.model_dump(exclude_none=True) for o in first.output]


def test_encrypted_reasoning_comes_back_into_the_template(tmp_path: Path) -> None:
    fake = engine()
    with serve(app(fake, data_dir=tmp_path)) as base, sdk(base) as client:
        thought, message = _sealed_turn(client)
        sealed = thought["encrypted_content"]
        assert isinstance(sealed, str)
        assert "reasoning section" not in sealed  # not readable by the client
        assert thought["summary"] == []  # no summariser: the text is the item's content
        streamed = list(
            client.responses.create(
                model=MODEL,
                input="Hi",
                store=False,
                include=["reasoning.encrypted_content"],
                stream=True,
            )
        )
        done = next(e for e in streamed if e.type == "response.output_item.done")
        assert done.item.type == "reasoning"  # type: ignore[union-attr]
        assert done.item.encrypted_content  # type: ignore[union-attr]
        # Codex sends the reasoning back with its encrypted content only, no text.
        resent = {"type": "reasoning", "summary": [], "encrypted_content": sealed}
        history = [{"role": "user", "content": "Hi"}, resent, message]
        client.responses.create(
            model=MODEL, input=[*history, {"role": "user", "content": "And?"}], store=False
        )
        assert "<|assistant|>[thought:This is a reasoning section]This is the rest\n" in prompt(
            fake
        )
        plain = client.responses.create(model=MODEL, input="Hi", store=False)
        assert plain.output[0].encrypted_content is None  # only when asked for
        refusals = {}
        for name, bad in {
            "tampered": sealed[:-6] + ("AAAAAA" if not sealed.endswith("AAAAAA") else "BBBBBB"),
            "not base64": "not!sealed",
            "another server's": ServerSecret(b"another deployment").seal(
                "responses.reasoning.encrypted_content", "I never thought this"
            ),
        }.items():
            with pytest.raises(openai.BadRequestError) as refused:
                client.responses.create(
                    model=MODEL, input=[history[0], {**resent, "encrypted_content": bad}]
                )
            refusals[name] = refused.value.body
    for body in refusals.values():
        assert body["param"] == "input[1].encrypted_content"  # type: ignore[index]
        assert "input[1]" in body["message"]  # type: ignore[index]
    assert len(fake.calls) == 4  # none of the refused reached the engine


def test_encrypted_reasoning_survives_a_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    with serve(app(engine(), data_dir=tmp_path)) as base, sdk(base) as client:
        thought, message = _sealed_turn(client)
    fake = engine()
    with serve(app(fake, data_dir=tmp_path)) as base, sdk(base) as client:
        client.responses.create(
            model=MODEL, input=[{"role": "user", "content": "Hi"}, thought, message], store=False
        )
    assert "[thought:This is a reasoning section]" in prompt(fake)


def _message(role: str, text: str) -> dict[str, object]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def test_a_codex_turn_and_its_resume_streamed(tmp_path: Path) -> None:
    """As Codex CLI runs `exec` then `exec resume`: streamed, nothing stored, the item of
    each `response.output_item.done` kept by the client and sent back (the reasoning by its
    `encrypted_content` alone, so only the sealed text can bring the thought back)."""
    fake = engine()
    codex = {
        "model": MODEL,
        "instructions": "You are a coding agent.",
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "prompt_cache_key": "0b9d7a1e-6b0f-4c5e-9a57-3f1f2b7f0c11",
        "parallel_tool_calls": False,
        "client_metadata": {"originator": "codex_exec"},
    }
    history = [_message("developer", "Be brief."), _message("user", "Hi")]
    with serve(app(fake, data_dir=tmp_path)) as base, sdk(base) as client:
        for turn in ("Hi", "And?"):
            if turn != "Hi":
                history.append(_message("user", turn))
            events = client.post(
                "/responses",
                body={**codex, "input": history},
                cast_to=object,
                stream=True,
                stream_cls=openai.Stream[dict[str, Any]],
            )
            for event in events:
                if event["type"] == "response.output_item.done":
                    item = event["item"]
                    if item["type"] == "reasoning":
                        assert item["summary"] == []
                        item = {k: v for k, v in item.items() if k != "content"}
                    history.append(item)
    assert [item["type"] for item in history] == [
        *("message", "message", "reasoning", "message"),
        *("message", "reasoning", "message"),
    ]
    assert "[thought:This is a reasoning section]This is the rest\n<|user|>And?" in prompt(fake)


def test_sealed_reasoning_added_to_a_conversation_reaches_the_template(tmp_path: Path) -> None:
    fake = engine()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve(app(fake, store_url=store, data_dir=tmp_path)) as base, sdk(base) as client:
        thought, message = _sealed_turn(client)
        sealed_only = {k: v for k, v in thought.items() if k != "content"}
        items = [{"role": "user", "content": "Hi"}, sealed_only, message]
        conversation = client.conversations.create(items=items)  # type: ignore[arg-type]
        client.responses.create(model=MODEL, input="And?", conversation=conversation.id)
        assert "[thought:This is a reasoning section]This is the rest\n<|user|>And?" in prompt(fake)
        forged = {**sealed_only, "encrypted_content": sealed_only["encrypted_content"][:-4]}
        with pytest.raises(openai.BadRequestError) as refused:
            client.conversations.create(items=[forged])  # type: ignore[list-item]
    assert str(refused.value.body["param"]).endswith(".encrypted_content")  # type: ignore[index]
