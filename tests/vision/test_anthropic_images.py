"""Anthropic's image blocks (`base64` and `url`) on /v1/messages, with the fake engine."""

from __future__ import annotations

import base64
import hashlib

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.unit.conftest import MODEL, serve
from tests.vision.images import BLUE, RED


async def test_base64_and_url_image_blocks_reach_the_engine() -> None:
    engine = FakeEngine(image_limit=3, image_tokens=5)
    blocks = [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(RED).decode(),
            },
        },
        {
            "type": "image",
            "source": {
                "type": "url",
                "url": "data:image/png;base64," + base64.b64encode(BLUE).decode(),
            },
        },
        {"type": "text", "text": "Compare them."},
    ]
    body = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": blocks}]}
    async with serve(engine) as client:
        response = await client.post("/v1/messages", json=body)
        assert response.status_code == 200, response.text
        digests = [image.digest for image in engine.calls[-1].options.images]
        assert digests == [hashlib.sha256(RED).hexdigest(), hashlib.sha256(BLUE).hexdigest()]
        assert response.json()["usage"]["input_tokens"] == (
            len(engine.calls[-1].prompt_token_ids) + 2 * 5
        )

        internal = {"type": "image", "source": {"type": "url", "url": "http://10.0.0.1/a.png"}}
        body["messages"] = [{"role": "user", "content": [internal]}]

    # Anthropic's error envelope, not OpenAI's: past the spec-checking transport.
    app = create_app(Settings(), engine)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as plain,
    ):
        refused = await plain.post("/v1/messages", json=body)
    assert refused.status_code == 400, refused.text
    assert "private" in refused.json()["error"]["message"]


async def test_a_bad_image_is_named_by_its_own_block_despite_the_system_prompt() -> None:
    engine = FakeEngine(image_limit=3, image_tokens=5)
    bad = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    good = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(RED).decode(),
        },
    }
    body = {
        "model": MODEL,
        "max_tokens": 4,
        "system": "Describe images.",
        "messages": [
            {"role": "user", "content": [good, {"type": "text", "text": "And?"}]},
            {"role": "assistant", "content": "Red."},
            # The text first: the chat message puts images before the text.
            {"role": "user", "content": [{"type": "text", "text": "This one?"}, bad]},
        ],
    }
    app = create_app(Settings(), engine)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as plain,
    ):
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            refused = await plain.post(path, json=body)
            assert refused.status_code == 400, refused.text
            message = refused.json()["error"]["message"]
            assert "messages[2].content[1]" in message, message
        assert (
            await plain.post("/v1/messages", json={**body, "messages": body["messages"][:1]})
        ).status_code == 200
