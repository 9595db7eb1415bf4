"""What the docs promise about images beside the chat answer itself, with the fake engine:
which models take images (`GET /v1/models`), the code of a refused image URL, and
`/tokenize`, which counts text only."""

from __future__ import annotations

from oai_server.engine.fake import FakeEngine
from tests.unit.conftest import MODEL, serve
from tests.vision.images import RED, data_url, user_with_images


async def test_the_model_list_says_which_models_take_images() -> None:
    for engine, modalities in (
        (FakeEngine(image_limit=2), ["text", "image"]),
        (FakeEngine(), ["text"]),
    ):
        async with serve(engine) as client:
            listed = (await client.get("/v1/models")).json()["data"]
            one = (await client.get(f"/v1/models/{MODEL}")).json()
        assert [m["input_modalities"] for m in listed] == [modalities]
        assert one["input_modalities"] == modalities


async def test_a_refused_image_url_is_invalid_image_url_naming_the_part() -> None:
    async with serve(FakeEngine(image_limit=2)) as client:
        message = user_with_images("Hi", "http://169.254.169.254/latest/meta-data/")
        body = {"model": MODEL, "messages": [message], "max_tokens": 4}
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_image_url", "messages[0].content[0]")


async def test_tokenize_refuses_images_naming_the_part() -> None:
    engine = FakeEngine(image_limit=2)
    async with serve(engine) as client:
        message = user_with_images("Hi", data_url(RED))
        response = await client.post("/tokenize", json={"model": MODEL, "messages": [message]})
        text = await client.post(
            "/tokenize", json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages[0].content[0]"
    assert text.status_code == 200
    assert engine.calls == []
