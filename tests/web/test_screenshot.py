"""The docs' picture of the page: the test takes it into a temporary file (the figure
itself is rewritten only by `python -m tests.web.screenshot`) and checks what it shows."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from playwright.sync_api import Page

from tests.web.browser import VIEWPORT
from tests.web.screenshot import PAGE_FIGURE, take


def test_screenshot_shows_the_rendered_conversation(page: Page, tmp_path: Path) -> None:
    shot = tmp_path / "web-chat.png"
    take(page, shot)
    replies = page.locator("#messages .msg.assistant")
    assert replies.count() == 2
    # Markdown rendered, not shown as source: the code block and the numbered list.
    assert "numbers[::-1]" in replies.nth(0).locator("pre code").inner_text()
    assert replies.nth(1).locator("ol li").count() == 3
    assert page.locator("#settings").get_attribute("open") is not None
    with Image.open(shot) as image:
        assert image.size == (VIEWPORT["width"], VIEWPORT["height"])
        # Not a blank page: text, code and controls in many shades.
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 24) or []) > 50
    with Image.open(PAGE_FIGURE) as figure:
        assert figure.size == (VIEWPORT["width"], VIEWPORT["height"])
