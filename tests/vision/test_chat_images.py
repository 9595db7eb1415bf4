"""Chat `image_url` parts through the server, with the fake engine (one that takes images
and one that does not): what reaches the engine and what a client is told."""

from __future__ import annotations

import http.server
import logging
import threading
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.media.policy import MediaPolicy
from tests.unit.conftest import MODEL, serve
from tests.vision.images import BLUE, RED, data_url, image_part, user_with_images

IMAGE_TOKENS = 7


def vision_engine() -> FakeEngine:
    return FakeEngine(image_limit=2, image_tokens=IMAGE_TOKENS)


async def ask(client: httpx.AsyncClient, *messages: dict[str, Any], **extra: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": list(messages), "max_tokens": 4, **extra}
    return await client.post("/v1/chat/completions", json=body)


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_images_reach_the_engine_in_order_with_placeholders() -> None:
    engine = vision_engine()
    async with serve(engine) as client:
        response = await ask(
            client,
            user_with_images("What differs?", data_url(RED), data_url(BLUE)),
        )
        assert response.status_code == 200, response.text
    (call,) = engine.calls
    assert [i.pixels.getpixel((0, 0)) for i in call.options.images] == [(255, 0, 0), (0, 0, 255)]
    prompt = bytes(call.prompt_token_ids).decode()
    assert "<image>\n<image>\nWhat differs?" in prompt
    # Each image's tokens count in the usage.
    usage = response.json()["usage"]
    assert usage["prompt_tokens"] == len(call.prompt_token_ids) + 2 * IMAGE_TOKENS


async def test_detail_is_accepted() -> None:
    engine = vision_engine()
    async with serve(engine) as client:
        message = {"role": "user", "content": [image_part(data_url(RED), "low")]}
        assert (await ask(client, message)).status_code == 200


async def test_a_text_only_model_refuses_images_by_name() -> None:
    async with serve(FakeEngine()) as client:
        error = error_of(await ask(client, user_with_images("Hi", data_url(RED))))
    assert f"'{MODEL}' does not take images" in error["message"]
    assert error["param"] == "messages[0].content[0]"


async def test_too_many_undecodable_or_oversized_images_are_400s_naming_the_part() -> None:
    engine = vision_engine()
    async with serve(engine, media_max_bytes=len(RED) + 10) as client:
        three = user_with_images("Hi", data_url(RED), data_url(RED), data_url(RED))
        error = error_of(await ask(client, three))
        assert error["param"] == "messages[0].content[2]"
        assert "--limit-mm-per-prompt" in error["message"]

        broken = {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                image_part(data_url(b"\x89PNG broken")),
            ],
        }
        error = error_of(await ask(client, broken))
        assert error["param"] == "messages[0].content[1]"
        assert "could not be decoded" in error["message"]

        big = user_with_images("Hi", data_url(RED + b"\0" * 100))
        error = error_of(await ask(client, {"role": "user", "content": "Hello"}, big))
        assert error["param"] == "messages[1].content[0]"
        assert "larger than" in error["message"]

        internal = user_with_images("Hi", "http://169.254.169.254/latest/meta-data/")
        error = error_of(await ask(client, internal))
        assert error["param"] == "messages[0].content[0]"
        # The server stays up and answers the next request.
        assert (await ask(client, user_with_images("Hi", data_url(RED)))).status_code == 200
    assert len(engine.calls) == 1


async def test_the_response_cache_keys_on_each_image() -> None:
    engine = vision_engine()
    async with serve(engine, response_cache="memory") as client:
        for image in (RED, RED, BLUE):
            response = await ask(
                client, user_with_images("Describe", data_url(image)), temperature=0
            )
            assert response.status_code == 200, response.text
    # The second red is a hit; the blue, with the same text, a miss.
    assert len(engine.calls) == 2
    assert engine.calls[1].options.images[0].digest != engine.calls[0].options.images[0].digest


async def test_what_answered_500_is_a_400_naming_the_part_with_no_error_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.vision.test_fetch import png_header

    # A redirect out of http comes from a host the fetch may reach: localhost, here.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = f"http://localhost:{server.server_address[1]}"
    allowed = MediaPolicy(allowed_domains=frozenset({"localhost"}))
    monkeypatch.setattr("oai_server.app.media_policy", lambda settings: allowed)
    urls = [
        "http://[::1",
        "http://exa\0mple.com/a.png",
        data_url(png_header(50_000, 50_000)),
        f"{root}/redirect?to=data:image/png;base64,AAAA",
        f"{root}/redirect?to=javascript:x",
    ]
    try:
        async with serve(vision_engine()) as client:
            for url in urls:
                error = error_of(await ask(client, user_with_images("Hi", url)))
                assert error["param"] == "messages[0].content[0]", (url, error)
    finally:
        server.shutdown()
        server.server_close()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


class _Redirect(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.path.removeprefix("/redirect?to="))
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass
