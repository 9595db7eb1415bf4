"""The official SDK's stored-completion methods, end to end, on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.live import serve
from tests.store.conftest import MODEL, ask, make_app, sdk


def test_create_list_retrieve_update_messages_delete(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        kept = ask(client, "Hello there", store=True, metadata={"topic": "greeting", "n": "1"})
        other = ask(client, "Bye", store=True, metadata={"topic": "farewell"})
        ask(client, "Not kept", store=False, metadata={"topic": "greeting"})

        listed = client.chat.completions.list()
        assert [c.id for c in listed.data] == [kept.id, other.id]
        assert listed.data[0].choices[0].message.content == kept.choices[0].message.content
        assert listed.data[0].metadata == {"topic": "greeting", "n": "1"}

        greeting = client.chat.completions.list(metadata={"topic": "greeting"})
        assert [c.id for c in greeting.data] == [kept.id]
        assert client.chat.completions.list(model=MODEL).data[0].id == kept.id
        assert client.chat.completions.list(model="another-model").data == []

        got = client.chat.completions.retrieve(kept.id)
        assert got.model_dump(exclude={"metadata"}) == kept.model_dump()

        updated = client.chat.completions.update(kept.id, metadata={"topic": "changed"})
        assert updated.metadata == {"topic": "changed"}
        assert client.chat.completions.list(metadata={"topic": "greeting"}).data == []
        assert client.chat.completions.retrieve(kept.id).metadata == {"topic": "changed"}

        messages = client.chat.completions.messages.list(kept.id)
        assert [(m.role, m.content) for m in messages.data] == [("user", "Hello there")]
        assert messages.data[0].id == f"{kept.id}-0"

        deleted = client.chat.completions.delete(kept.id)
        assert (deleted.id, deleted.deleted) == (kept.id, True)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.retrieve(kept.id)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.messages.list(kept.id)
        assert [c.id for c in client.chat.completions.list().data] == [other.id]


def test_auto_paging_walks_every_completion_once(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        ids = [
            ask(client, f"q{i}", store=True, metadata={"parity": str(i % 2)}).id for i in range(25)
        ]

        assert [c.id for c in client.chat.completions.list(limit=4)] == ids
        assert [c.id for c in client.chat.completions.list(limit=4, order="desc")] == ids[::-1]
        odd = [c.id for c in client.chat.completions.list(limit=3, metadata={"parity": "1"})]
        assert odd == ids[1::2]

        first = client.chat.completions.list(limit=10)
        assert (first.has_more, len(first.data)) == (True, 10)
        last = client.chat.completions.list(limit=10, after=ids[19])
        assert ([c.id for c in last.data], last.has_more) == (ids[20:], False)


def test_messages_list_has_its_own_pagination(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        turns = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "One"}]},
            {"role": "assistant", "content": "Two"},
            {"role": "user", "content": "Three"},
            {"role": "user", "content": "Four"},
        ]
        done = client.chat.completions.create(model=MODEL, messages=turns, store=True)  # type: ignore[arg-type]

        walked = list(client.chat.completions.messages.list(done.id, limit=2))
        assert [(m.role, m.content) for m in walked] == [
            ("system", "Be brief."), ("user", "One"), ("assistant", "Two"),
            ("user", "Three"), ("user", "Four"),
        ]  # fmt: skip
        parts = walked[1].content_parts or []
        assert [(p.type, getattr(p, "text", None)) for p in parts] == [("text", "One")]
        page = client.chat.completions.messages.list(done.id, limit=2, order="desc")
        assert [m.content for m in page.data] == ["Four", "Three"]
        assert page.has_more


def test_a_streamed_answer_is_stored_as_the_client_got_it(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        stream = ask(client, stream=True, store=True, stream_options={"include_usage": True})
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

        stored = client.chat.completions.retrieve(chunks[0].id)
        assert stored.choices[0].message.content == text
        assert stored.choices[0].finish_reason == "stop"
        assert stored.usage is not None
        assert stored.usage.completion_tokens > 0


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("order=up", "order"),
        ("after=chatcmpl-nothing", "after"),
    ],
)
def test_bad_list_parameters_are_400s(query: str, param: str) -> None:
    with serve(make_app("sqlite:///:memory:")) as base, sdk(base) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.get(f"/chat/completions?{query}", cast_to=httpx.Response)
        assert caught.value.param == param


def test_unknown_ids_are_404s(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        for call in (
            lambda: client.chat.completions.retrieve("chatcmpl-missing"),
            lambda: client.chat.completions.update("chatcmpl-missing", metadata={}),
            lambda: client.chat.completions.delete("chatcmpl-missing"),
            lambda: client.chat.completions.messages.list("chatcmpl-missing"),
        ):
            with pytest.raises(openai.NotFoundError):
                call()


@pytest.mark.parametrize(
    ("metadata", "param"),
    [
        ({f"k{i}": "v" for i in range(17)}, "metadata"),
        ({"k" * 65: "v"}, "metadata"),
        ({"key": "v" * 513}, "metadata.key"),
    ],
)
def test_metadata_limits_on_create_and_update(metadata: dict[str, str], param: str) -> None:
    with serve(make_app("sqlite:///:memory:")) as base, sdk(base) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            ask(client, store=True, metadata=metadata)
        assert caught.value.param == param
        done = ask(client, store=True, metadata={f"k{i}": "v" * 512 for i in range(16)})
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.update(done.id, metadata=metadata)
        assert caught.value.param == param
