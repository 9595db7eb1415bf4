"""A vision-language model served as any model is: images through chat, the SDK and
LangChain, the same answer for the same bytes, fetched or inline, and no URL that
reaches inside. One real server for the module (`vlm_server`), answers of a few tokens."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from openai import OpenAI

from tests.conformance import checked_post
from tests.integration.conftest import SDK_TIMEOUT_S, Server
from tests.vision import build_test_vlm
from tests.vision.conftest import IMAGE_LIMIT, IMAGE_PROMPT_TOKENS, VLM
from tests.vision.images import BLUE, RED, data_url, png, user_with_images
from tests.web.browser import chromium, new_context, open_page, send, wait_reply

pytestmark = pytest.mark.integration

QUESTION = "What is in the picture? " + "Describe every part of it in detail. " * 40


def ask(server: Server, *urls: str, text: str = QUESTION, max_tokens: int = 6) -> httpx.Response:
    body = {
        "model": VLM,
        "messages": [user_with_images(text, *urls)],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    return checked_post(f"{server.base_url}/chat/completions", json=body, timeout=SDK_TIMEOUT_S)


def answer(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def refused(response: httpx.Response, param: str) -> str:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["param"] == param, error
    return str(error["message"])


def test_same_image_same_answer_other_image_other_answer(vlm_server: Server) -> None:
    red, blue = ask(vlm_server, data_url(RED)), ask(vlm_server, data_url(BLUE))
    # One token fewer: not the response cache's entry, the engine answers again.
    again = ask(vlm_server, data_url(RED), max_tokens=5)
    assert again.headers["x-cache"] == "miss"
    assert answer(red).startswith(answer(again))
    assert answer(red) != answer(blue)
    # The repeated image's blocks came from the prefix cache; the other image's did not
    # (it comes first: nothing of its prompt is shared).
    assert red.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert blue.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_each_image_adds_its_tokens_to_the_prompt(vlm_server: Server) -> None:
    counts = [
        ask(vlm_server, *[data_url(RED)] * n, text="Hi").json()["usage"]["prompt_tokens"]
        for n in range(3)
    ]
    # The model's template writes one `<image>` token per image part, which the model's
    # processor expands into the image's tokens.
    assert [b - a for a, b in itertools.pairwise(counts)] == [IMAGE_PROMPT_TOKENS] * 2, counts
    # The counting endpoints count them as the answer's usage did (the model's processor).
    images = [{"type": "input_image", "image_url": data_url(RED)}] * 2
    content = [*images, {"type": "input_text", "text": "Hi"}]
    body = {"model": VLM, "input": [{"role": "user", "content": content}]}
    counted = checked_post(
        f"{vlm_server.base_url}/responses/input_tokens", json=body, timeout=SDK_TIMEOUT_S
    )
    assert counted.status_code == 200, counted.text
    answered = checked_post(
        f"{vlm_server.base_url}/responses",
        json={**body, "max_output_tokens": 1, "temperature": 0},
        timeout=SDK_TIMEOUT_S,
    )
    assert answered.status_code == 200, answered.text
    assert counted.json()["input_tokens"] == answered.json()["usage"]["input_tokens"]
    assert counted.json()["input_tokens"] > 2 * IMAGE_PROMPT_TOKENS


def test_fetched_and_inline_bytes_give_the_same_answer(
    vlm_server: Server, image_server: str
) -> None:
    fetched = ask(vlm_server, f"{image_server}/red.png")
    assert answer(fetched) == answer(ask(vlm_server, data_url(RED)))
    redirected = ask(vlm_server, f"{image_server}/redirect?to=/blue.png")
    assert answer(redirected) == answer(ask(vlm_server, data_url(BLUE)))


def test_urls_that_reach_inside_are_refused(vlm_server: Server, image_server: str) -> None:
    port = image_server.rsplit(":", 1)[1]
    for url in (
        f"http://127.0.0.1:{port}/red.png",
        "http://169.254.169.254/latest/meta-data/",
        f"{image_server}/redirect?to=http://127.0.0.1:{port}/red.png",
        f"{image_server}/redirect?to=http://169.254.169.254/",
    ):
        refused(ask(vlm_server, url), "messages[0].content[0]")


def test_bad_images_are_400s_naming_the_part_and_the_server_stays_up(vlm_server: Server) -> None:
    big = png((1, 2, 3), (2000, 2000)) + b"\0" * 100_000
    assert "larger than" in refused(ask(vlm_server, data_url(big)), "messages[0].content[0]")
    broken = data_url(b"\x89PNG\r\n\x1a\n broken")
    message = refused(ask(vlm_server, data_url(RED), broken), "messages[0].content[1]")
    assert "could not be decoded" in message
    too_many = [data_url(RED)] * (IMAGE_LIMIT + 1)
    message = refused(ask(vlm_server, *too_many), f"messages[0].content[{IMAGE_LIMIT}]")
    assert "--limit-mm-per-prompt" in message
    assert answer(ask(vlm_server, data_url(RED)))


def test_the_response_cache_hits_for_the_same_image_only(vlm_server: Server) -> None:
    text = "Which colour? (cache)"
    first, second, other = (ask(vlm_server, data_url(i), text=text) for i in (RED, RED, BLUE))
    assert [r.headers["x-cache"] for r in (first, second, other)] == ["miss", "hit", "miss"]
    assert answer(first) == answer(second)


def test_openai_sdk(vlm_server: Server, sdk_http: httpx.Client) -> None:
    client = OpenAI(base_url=vlm_server.base_url, api_key="x", http_client=sdk_http)
    completion = client.chat.completions.create(
        model=VLM,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": QUESTION},
                    {"type": "image_url", "image_url": {"url": data_url(RED), "detail": "low"}},
                ],
            }
        ],
        max_tokens=6,
        temperature=0,
    )
    assert completion.choices[0].message.content
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > IMAGE_PROMPT_TOKENS


def test_langchain_human_message_with_an_image(vlm_server: Server, sdk_http: httpx.Client) -> None:
    llm = ChatOpenAI(
        base_url=vlm_server.base_url,
        api_key="x",  # type: ignore[arg-type]
        model=VLM,
        temperature=0,
        max_completion_tokens=6,
        http_client=sdk_http,
    )
    parts: list[str | dict[str, Any]] = [
        {"type": "text", "text": QUESTION},
        {"type": "image_url", "image_url": {"url": data_url(RED)}},
    ]
    red = llm.invoke([HumanMessage(content=parts)])
    parts[1] = {"type": "image_url", "image_url": {"url": data_url(BLUE)}}
    blue = llm.invoke([HumanMessage(content=parts)])
    assert red.content
    assert blue.content
    assert red.content != blue.content


def test_the_chat_page_attaches_an_image_and_answers(vlm_server: Server) -> None:
    with chromium() as browser:
        context = new_context(browser)
        page = context.new_page()
        open_page(page, vlm_server.root)
        assert page.input_value("#model") == VLM
        page.click("#settings summary")
        page.fill("#max-tokens", "6")
        page.fill("#temperature", "0")
        # Offered for this model, which takes images.
        assert page.is_visible("#attach")
        page.set_input_files(
            "#image-file", files=[{"name": "red.png", "mimeType": "image/png", "buffer": RED}]
        )
        page.wait_for_selector("#attachments img")
        send(page, "What is in the picture?")
        reply = wait_reply(page)
        assert reply.strip()
        assert page.locator(".msg.assistant .error").count() == 0
        # The image is shown in the conversation, and the tray is empty again.
        assert page.locator(".msg.user .images img").count() == 1
        assert page.locator("#attachments img").count() == 0
        context.close()


def test_image_bombs_are_refused_and_a_big_image_is_answered(vlm_server: Server) -> None:
    from tests.vision.test_image_bombs import bomb

    message = refused(ask(vlm_server, *[bomb()] * IMAGE_LIMIT), "messages[0].content[2]")
    assert "--media-max-request-pixels" in message
    # One 8192x8192 image, shrunk to the processor's 64 pixels before vLLM sees it.
    assert answer(ask(vlm_server, bomb()))


def test_the_processors_side_is_read_from_the_model(vlm_dir: Path) -> None:
    from oai_server.engine.vllm.multimodal import image_max_side

    def config(kwargs: dict[str, Any] | None) -> SimpleNamespace:
        multimodal = SimpleNamespace(
            get_limit_per_prompt=lambda modality: 3, mm_processor_kwargs=kwargs
        )
        return SimpleNamespace(
            model=str(vlm_dir),
            revision=None,
            is_multimodal_model=True,
            multimodal_config=multimodal,
        )

    assert image_max_side(config(None)) == build_test_vlm.IMAGE_SIZE
    assert image_max_side(config({"size": {"longest_edge": 32}})) == 32
