"""The chat page answers a question with the real engine, in a real browser."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from tests.integration.conftest import Server
from tests.web.browser import chromium, new_context, open_page, send, wait_reply

pytestmark = pytest.mark.integration


@pytest.fixture
def page() -> Iterator[Page]:
    with chromium() as browser:
        context = new_context(browser)
        yield context.new_page()
        context.close()


def test_a_question_answered_on_the_page(server: Server, page: Page) -> None:
    open_page(page, server.root)
    assert page.input_value("#model") == "smollm2-135m-instruct"
    page.click("#settings summary")
    page.fill("#max-tokens", "24")
    page.fill("#temperature", "0")
    page.focus("#prompt")
    send(page, "What is the capital of France?")
    reply = wait_reply(page)
    assert reply.strip()
    assert page.locator(".msg.assistant .error").count() == 0
    figures = page.inner_text(".msg.assistant .stats")
    assert re.search(r"TTFT \d", figures)
    tokens = int(re.search(r"(\d+) tokens", figures).group(1))
    assert 0 < tokens <= 24
