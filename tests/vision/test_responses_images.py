"""Responses `input_image`, by URL and by an uploaded file's id, with the fake engine."""

from __future__ import annotations

import hashlib

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, serve
from tests.vision.images import BLUE, RED, data_url


def vision_engine() -> FakeEngine:
    return FakeEngine(image_limit=3, image_tokens=5)


def image_message(*images: dict[str, str], text: str = "What is it?") -> dict[str, object]:
    parts = [{"type": "input_image", **image} for image in images]
    return {"role": "user", "content": [*parts, {"type": "input_text", "text": text}]}


async def test_input_image_by_file_id_and_by_url() -> None:
    engine = vision_engine()
    async with serve(engine) as client:
        upload = await client.post(
            "/v1/files",
            files={"file": ("red.png", RED, "image/png")},
            data={"purpose": "vision"},
        )
        assert upload.status_code == 200, upload.text
        file_id = upload.json()["id"]
        body = {
            "model": MODEL,
            "input": [image_message({"file_id": file_id}, {"image_url": data_url(BLUE)})],
            "max_output_tokens": 4,
        }
        response = await client.post("/v1/responses", json=body)
        assert response.status_code == 200, response.text
        digests = [image.digest for image in engine.calls[-1].options.images]
        assert digests == [hashlib.sha256(RED).hexdigest(), hashlib.sha256(BLUE).hexdigest()]
        assert "<image>\n<image>\nWhat is it?" in bytes(engine.calls[-1].prompt_token_ids).decode()

        # The stored input keeps the file's id, not a copy of its bytes.
        items = await client.get(f"/v1/responses/{response.json()['id']}/input_items")
        (part, *_) = items.json()["data"][0]["content"]
        assert part == {
            "type": "input_image",
            "file_id": file_id,
            "image_url": None,
            "detail": "auto",
        }

        # A later turn sees the earlier turn's image again.
        follow = {
            "model": MODEL,
            "previous_response_id": response.json()["id"],
            "input": "And now?",
            "max_output_tokens": 4,
        }
        assert (await client.post("/v1/responses", json=follow)).status_code == 200
        assert len(engine.calls[-1].options.images) == 2


async def test_unknown_file_and_text_only_models_are_refused() -> None:
    engine = vision_engine()
    async with serve(engine) as client:
        body = {"model": MODEL, "input": [image_message({"file_id": "file-nope"})]}
        response = await client.post("/v1/responses", json=body)
        assert response.status_code == 400, response.text
        assert "file-nope" in response.json()["error"]["message"]
    async with serve(FakeEngine()) as client:
        body = {"model": MODEL, "input": [image_message({"image_url": data_url(RED)})]}
        response = await client.post("/v1/responses", json=body)
        assert response.status_code == 400, response.text
        assert "does not take images" in response.json()["error"]["message"]
