"""The chat page with a reasoning model: the thinking apart from the answer, collapsed,
and sampling left to the model's own defaults."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from oai_server.engine.fake import FakeEngine
from tests.unit.test_reasoning import THINK, pieces, vllm_split
from tests.web.browser import open_page, send, wait_reply
from tests.web.conftest import Serve

# SIMPLE_REASONING of vLLM's DeepSeek-R1 parser tests (see tests/unit/test_reasoning.py).
TEXT = "This is a reasoning section</think>This is the rest"


def test_thinking_is_shown_apart_collapsed_and_sampling_is_the_models(
    page: Page, live: Serve
) -> None:
    reasoning, content = vllm_split(TEXT)
    engine = FakeEngine(tokens=pieces(TEXT), added_tokens=THINK, token_delay=0.02)
    with live(engine, reasoning_parser="deepseek_r1") as root:
        open_page(page, root)
        with page.expect_request("**/v1/chat/completions") as request:
            send(page, "Think first")
        assert wait_reply(page) == content
        body = json.loads(request.value.post_data or "{}")
        # No sampling the user did not set: the model's generation config applies.
        assert "temperature" not in body
        thinking = page.locator(".msg.assistant .thinking")
        expect(thinking).to_be_visible()
        expect(thinking.locator("summary")).to_have_text("Thinking")
        thought = thinking.locator(".thought")
        expect(thought).to_be_hidden()  # collapsed until asked for
        assert thought.text_content() == reasoning
        thinking.locator("summary").click()
        expect(thought).to_be_visible()
        expect(thought).to_have_text(reasoning)
        # The answer's own text holds none of the thinking.
        assert reasoning not in page.inner_text(".msg.assistant .content")


def test_a_reply_without_thinking_shows_no_thinking_block(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply="Plain answer.")
    with live(engine) as root:
        open_page(page, root)
        send(page, "hi")
        assert wait_reply(page) == "Plain answer."
        expect(page.locator(".msg.assistant .thinking")).to_be_hidden()
