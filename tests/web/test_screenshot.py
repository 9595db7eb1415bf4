"""The README's picture of the page, taken by the test run (never by hand)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from playwright.sync_api import Page

from oai_server.engine.fake import FakeEngine
from tests.web.browser import open_page, send, wait_reply
from tests.web.conftest import Serve

SCREENSHOT = Path(__file__).resolve().parents[2] / "benchmarks" / "figures" / "web-chat.png"

FIRST = "Reversing a list in Python takes one line. Use **slicing** for a new list:\n\n"
FIRST += "```python\nnumbers = [1, 2, 3]\nprint(numbers[::-1])  # [3, 2, 1]\n```\n\n"
FIRST += "Or reverse it *in place* with `numbers.reverse()`."
SECOND = "Pick by what you need:\n\n1. `numbers[::-1]` copies the list\n"
SECOND += "2. `numbers.reverse()` changes it and returns `None`\n"
SECOND += "3. `reversed(numbers)` gives an iterator, no copy"


def test_screenshot_for_the_readme(page: Page, live: Serve) -> None:
    engine = FakeEngine(
        tokens=[FIRST[i : i + 4] for i in range(0, len(FIRST), 4)], token_delay=0.01
    )
    with live(engine) as root:
        open_page(page, root)
        send(page, "How do I reverse a list in Python?")
        wait_reply(page)
        engine.tokens = [SECOND[i : i + 4] for i in range(0, len(SECOND), 4)]
        send(page, "Which one should I use?")
        wait_reply(page)
        page.click("#settings summary")
        page.locator("#prompt").blur()
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
    with Image.open(SCREENSHOT) as image:
        assert image.size == (1100, 720)
