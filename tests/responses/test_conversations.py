"""The Conversations API with the official SDK, and responses in a conversation."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from oai_server.engine.fake import FakeEngine
from tests.live import serve
from tests.responses.conftest import app_on, prompt_of
from tests.store.conftest import KEYS, MODEL, sdk


def test_conversation_lifecycle_and_items(store_url: str, template: Path) -> None:
    with serve(app_on(store_url, template, FakeEngine())) as base, sdk(base) as client:
        conv = client.conversations.create(
            metadata={"topic": "demo"}, items=[{"role": "user", "content": "first"}]
        )
        assert conv.metadata == {"topic": "demo"}
        assert client.conversations.retrieve(conv.id).id == conv.id
        updated = client.conversations.update(conv.id, metadata={"topic": "new"})
        assert updated.metadata == {"topic": "new"}

        added = client.conversations.items.create(
            conv.id,
            items=[
                {"role": "user", "content": "second"},
                {"type": "message", "role": "assistant", "content": "reply"},
            ],
        )
        assert [i.type for i in added.data] == ["message", "message"]
        items = client.conversations.items.list(conv.id, order="asc")
        texts = [i.content[0].text for i in items.data]  # type: ignore[union-attr]
        assert texts == ["first", "second", "reply"]
        assert [i.id for i in client.conversations.items.list(conv.id)] == [
            i.id for i in reversed(items.data)
        ]
        page = client.conversations.items.list(
            conv.id, limit=1, after=items.data[0].id, order="asc"
        )
        assert [i.id for i in page.data] == [items.data[1].id]
        assert page.has_more

        one = client.conversations.items.retrieve(items.data[1].id, conversation_id=conv.id)
        assert one.id == items.data[1].id
        client.conversations.items.delete(items.data[1].id, conversation_id=conv.id)
        left = [i.id for i in client.conversations.items.list(conv.id, order="asc")]
        assert left == [items.data[0].id, items.data[2].id]

        deleted = client.conversations.delete(conv.id)
        assert deleted.deleted
        with pytest.raises(openai.NotFoundError):
            client.conversations.retrieve(conv.id)


def test_responses_in_a_conversation_grow_it(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply_for=lambda prompt: f"answer {prompt.count('<|user|>')}")
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        conv = client.conversations.create()
        first = client.responses.create(model=MODEL, input="one", conversation=conv.id)
        assert first.conversation is not None
        assert first.conversation.id == conv.id
        second = client.responses.create(model=MODEL, input="two", conversation={"id": conv.id})
        assert second.output_text == "answer 2"
        assert "<|user|>one\n<|assistant|>answer 1\n<|user|>two" in prompt_of(engine)

        items = client.conversations.items.list(conv.id, order="asc")
        texts = [i.content[0].text for i in items.data]  # type: ignore[union-attr]
        assert texts == ["one", "answer 1", "two", "answer 2"]

        with pytest.raises(openai.NotFoundError):
            client.responses.create(model=MODEL, input="x", conversation="conv_missing")
        with pytest.raises(openai.BadRequestError):
            client.responses.create(
                model=MODEL, input="x", conversation=conv.id, previous_response_id=first.id
            )


def test_conversations_are_per_key(store_url: str, template: Path) -> None:
    app = app_on(store_url, template, FakeEngine(), api_key=KEYS)
    with serve(app) as base, sdk(base, "sk-alice") as alice, sdk(base, "sk-bob") as bob:
        conv = alice.conversations.create()
        with pytest.raises(openai.NotFoundError):
            bob.conversations.retrieve(conv.id)
        with pytest.raises(openai.NotFoundError):
            bob.conversations.items.list(conv.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model=MODEL, input="x", conversation=conv.id)
