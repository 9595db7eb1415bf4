"""The token-counting endpoints count an image's tokens as an answer's usage does."""

from __future__ import annotations

import base64

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, serve
from tests.vision.images import BLUE, RED, data_url

IMAGE_TOKENS = 5


async def test_responses_input_tokens_equal_the_answers_usage() -> None:
    engine = FakeEngine(image_limit=3, image_tokens=IMAGE_TOKENS)
    parts = [
        {"type": "input_image", "image_url": data_url(RED)},
        {"type": "input_image", "image_url": data_url(BLUE)},
        {"type": "input_text", "text": "What are they?"},
    ]
    body = {"model": MODEL, "input": [{"role": "user", "content": parts}]}
    async with serve(engine) as client:
        counted = await client.post("/v1/responses/input_tokens", json=body)
        assert counted.status_code == 200, counted.text
        answer = await client.post("/v1/responses", json={**body, "max_output_tokens": 2})
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]["input_tokens"]
        assert counted.json()["input_tokens"] == usage
        assert usage == len(engine.calls[-1].prompt_token_ids) + 2 * IMAGE_TOKENS

        # A later turn counts the earlier turn's images too.
        follow = {"model": MODEL, "previous_response_id": answer.json()["id"], "input": "Sure?"}
        counted = await client.post("/v1/responses/input_tokens", json=follow)
        answer = await client.post("/v1/responses", json={**follow, "max_output_tokens": 2})
        assert counted.json()["input_tokens"] == answer.json()["usage"]["input_tokens"]


async def test_anthropic_count_tokens_equal_the_answers_usage() -> None:
    engine = FakeEngine(image_limit=3, image_tokens=IMAGE_TOKENS)
    image = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(RED).decode(),
        },
    }
    body = {
        "model": MODEL,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [image, {"type": "text", "text": "Colour?"}]}],
    }
    async with serve(engine) as client:
        counted = await client.post("/v1/messages/count_tokens", json=body)
        assert counted.status_code == 200, counted.text
        answer = await client.post("/v1/messages", json={**body, "max_tokens": 2})
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]["input_tokens"]
        assert counted.json()["input_tokens"] == usage
        assert usage == len(engine.calls[-1].prompt_token_ids) + IMAGE_TOKENS
