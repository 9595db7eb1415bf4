"""Stored completions, Responses state and conversations keep an image's bytes once.

Each turn of a conversation sends its image again (a chat client its whole history, a
Responses client an image it repeats); the store holds the bytes once, by SHA-256, and
each record refers to them; what a client reads back, and what a later turn sends the
engine, is the image as it was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from oai_server.engine.fake import FakeEngine
from oai_server.store.interface import Record, StoredItem, StoredObject
from oai_server.store.sql import SQLStore
from oai_server.store.url import async_url
from tests.unit.conftest import MODEL, serve
from tests.vision.images import BLUE, RED, data_url, image_part

RED_DIGEST = hashlib.sha256(RED).hexdigest()
PAYLOAD = data_url(RED).split(",", 1)[1]


@pytest.fixture
async def client(store_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, FakeEngine]]:
    engine = FakeEngine(image_limit=3, image_tokens=5)
    async with serve(engine, store_url=store_url) as client:
        yield client, engine


async def held(store_url: str) -> tuple[list[tuple[str, int]], list[str]]:
    """The images the database holds (hash, size), and every stored item's body."""
    store = SQLStore(async_url(store_url, Path()))
    try:
        async with store.engine.connect() as conn:
            rows = await conn.execute(text("SELECT sha256, bytes FROM store_images"))
            images = [(row[0], int(row[1])) for row in rows]
            bodies = [
                str(row[0]) for row in await conn.execute(text("SELECT body FROM store_items"))
            ]
    finally:
        await store.close()
    return images, bodies


def image_urls(message: dict[str, Any]) -> list[str]:
    return [
        p["image_url"]["url"] for p in message["content_parts"] or () if p["type"] == "image_url"
    ]


async def test_three_stored_chat_turns_hold_the_image_once(
    client: tuple[httpx.AsyncClient, FakeEngine], store_url: str
) -> None:
    http, engine = client
    history: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [image_part(data_url(RED)), {"type": "text", "text": "Colour?"}],
        }
    ]
    ids = []
    for turn in range(3):
        body = {"model": MODEL, "messages": history, "store": True, "max_completion_tokens": 2}
        answer = await http.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        assert [i.digest for i in engine.calls[-1].options.images] == [RED_DIGEST]
        ids.append(answer.json()["id"])
        history += [
            {"role": "assistant", "content": answer.json()["choices"][0]["message"]["content"]},
            {"role": "user", "content": f"And {turn}?"},
        ]

    for completion_id in ids:
        messages = await http.get(f"/v1/chat/completions/{completion_id}/messages?order=asc")
        assert messages.status_code == 200, messages.text
        assert image_urls(messages.json()["data"][0]) == [data_url(RED)]

    images, bodies = await held(store_url)
    assert images == [(RED_DIGEST, len(RED))]
    assert not [b for b in bodies if PAYLOAD in b]
    assert sum(RED_DIGEST in b for b in bodies) == 3


async def test_responses_turns_refer_to_one_copy_and_turn_three_sees_the_image(
    client: tuple[httpx.AsyncClient, FakeEngine], store_url: str
) -> None:
    http, engine = client

    def turn(*parts: dict[str, str], previous: str | None = None) -> dict[str, Any]:
        content = [*parts, {"type": "input_text", "text": "Colour?"}]
        body: dict[str, Any] = {
            "model": MODEL,
            "input": [{"role": "user", "content": content}],
            "max_output_tokens": 2,
        }
        if previous is not None:
            body["previous_response_id"] = previous
        return body

    red = {"type": "input_image", "image_url": data_url(RED)}
    first = await http.post("/v1/responses", json=turn(red))
    assert first.status_code == 200, first.text
    # The client sends the same image again on its second turn.
    second = await http.post("/v1/responses", json=turn(red, previous=first.json()["id"]))
    assert second.status_code == 200, second.text
    third = await http.post("/v1/responses", json=turn(previous=second.json()["id"]))
    assert third.status_code == 200, third.text
    # Rebuilt from stored items: the image as the first turn sent it, both times.
    assert [i.digest for i in engine.calls[-1].options.images] == [RED_DIGEST, RED_DIGEST]

    items = await http.get(f"/v1/responses/{first.json()['id']}/input_items")
    (part, _text) = items.json()["data"][0]["content"]
    assert part["image_url"] == data_url(RED)

    # A conversation's items, too.
    conversation = await http.post("/v1/conversations", json={})
    conversation_id = conversation.json()["id"]
    blue = {"type": "input_image", "image_url": data_url(BLUE)}
    for parts in ((red,), (blue,)):
        body = {**turn(*parts), "conversation": conversation_id}
        assert (await http.post("/v1/responses", json=body)).status_code == 200
    listed = await http.get(f"/v1/conversations/{conversation_id}/items?order=asc")
    urls = [
        p["image_url"]
        for item in listed.json()["data"]
        if item["type"] == "message"
        for p in item["content"]
        if p["type"] == "input_image"
    ]
    assert urls == [data_url(RED), data_url(BLUE)]

    images, bodies = await held(store_url)
    assert sorted(images) == sorted(
        [(RED_DIGEST, len(RED)), (hashlib.sha256(BLUE).hexdigest(), len(BLUE))]
    )
    assert not [b for b in bodies if PAYLOAD in b]


def _reference(digest: str, size: int) -> str:
    """How a stored item names an image's bytes (`oai_server.store.images`)."""
    return f"oai-image:{digest}:{size}:data:image/png;base64"


async def stored(http: httpx.AsyncClient, completion_id: str, headers: dict[str, str]) -> None:
    """Wait until the completion's queued write is in the store."""
    for _ in range(200):
        found = await http.get(f"/v1/chat/completions/{completion_id}", headers=headers)
        if found.status_code == 200:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{completion_id} was never stored")


async def _read_back(http: httpx.AsyncClient, key: str, url: str) -> str:
    """The image URL a conversation item holding `url` reads back as, for `key`."""
    auth = {"Authorization": f"Bearer {key}"}
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "image_url": url}],
    }
    created = await http.post("/v1/conversations", json={"items": [item]}, headers=auth)
    assert created.status_code == 200, created.text
    listed = await http.get(f"/v1/conversations/{created.json()['id']}/items", headers=auth)
    assert listed.status_code == 200, listed.text
    (message,) = listed.json()["data"]
    return str(message["content"][0]["image_url"])


async def test_a_key_gets_no_other_keys_image_by_its_hash(store_url: str) -> None:
    engine = FakeEngine(image_limit=3, image_tokens=5)
    async with serve(engine, store_url=store_url, api_key=["sk-alice", "sk-bob"]) as http:
        alice = {"Authorization": "Bearer sk-alice"}
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": [image_part(data_url(RED))]}],
            "store": True,
            "max_completion_tokens": 2,
        }
        answer = await http.post("/v1/chat/completions", json=body, headers=alice)
        assert answer.status_code == 200, answer.text
        await stored(http, answer.json()["id"], alice)
        assert (await held(store_url))[0] == [(RED_DIGEST, len(RED))]

        # Bob names Alice's image by its hash: he reads back what he wrote, as he does
        # for a hash no one stored (no "is this image stored?" answer either way).
        stolen = _reference(RED_DIGEST, len(RED))
        unknown = _reference("0" * 64, len(RED))
        assert await _read_back(http, "sk-bob", stolen) == stolen
        assert await _read_back(http, "sk-bob", unknown) == unknown
        # Alice writing a reference by hand gets no bytes back either: only the images
        # an item was stored with are put back into it.
        assert await _read_back(http, "sk-alice", stolen) == stolen


async def test_an_image_is_deleted_with_its_last_reference(store_url: str) -> None:
    engine = FakeEngine(image_limit=3, image_tokens=5)
    async with serve(engine, store_url=store_url) as http:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": [image_part(data_url(RED))]}],
            "store": True,
            "max_completion_tokens": 2,
        }
        ids = []
        for _ in range(2):
            answer = await http.post("/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
            ids.append(answer.json()["id"])
            await stored(http, ids[-1], {})
        assert (await http.delete(f"/v1/chat/completions/{ids[0]}")).status_code == 200
        # The other completion still refers to it.
        assert (await held(store_url))[0] == [(RED_DIGEST, len(RED))]
        messages = await http.get(f"/v1/chat/completions/{ids[1]}/messages")
        assert image_urls(messages.json()["data"][0]) == [data_url(RED)]
        assert (await http.delete(f"/v1/chat/completions/{ids[1]}")).status_code == 200
        assert (await held(store_url))[0] == []


async def test_retention_deletes_the_images_of_what_it_deletes(store_url: str) -> None:
    store = SQLStore(async_url(store_url, Path()))
    await store.migrate()
    try:
        for object_id, created_at in (("chatcmpl-old", 1), ("chatcmpl-new", 10)):
            obj = StoredObject(
                id=object_id,
                kind="chat.completion",
                owner="",
                model=MODEL,
                created_at=created_at,
                metadata={},
                body={"id": object_id},
            )
            color = RED if object_id == "chatcmpl-old" else BLUE
            part = {"type": "image_url", "image_url": {"url": data_url(color)}}
            item = StoredItem(
                id=f"{object_id}-0",
                section="input",
                kind="message",
                body={"role": "user", "content": [part]},
            )
            await store.put([Record(obj, [item])])
        assert await store.delete_before(5) == 1
    finally:
        await store.close()
    assert (await held(store_url))[0] == [(hashlib.sha256(BLUE).hexdigest(), len(BLUE))]
