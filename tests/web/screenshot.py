"""The docs' picture of the chat page, taken by an explicit command, never by a test run.

    PYTHONPATH=. python -m tests.web.screenshot   # rewrites docs/figures/web-chat.png

A scripted conversation (the fake engine, streamed in 4-character tokens) in Debian's
Chromium at the suite's viewport; `tests/web/test_screenshot.py` takes the same picture
into a temporary file and checks what it shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve
from tests.web.browser import chromium, new_context, open_page, send, wait_reply

PAGE_FIGURE = Path(__file__).resolve().parents[2] / "docs" / "figures" / "web-chat.png"

FIRST = "Reversing a list in Python takes one line. Use **slicing** for a new list:\n\n"
FIRST += "```python\nnumbers = [1, 2, 3]\nprint(numbers[::-1])  # [3, 2, 1]\n```\n\n"
FIRST += "Or reverse it *in place* with `numbers.reverse()`."
SECOND = "Pick by what you need:\n\n1. `numbers[::-1]` copies the list\n"
SECOND += "2. `numbers.reverse()` changes it and returns `None`\n"
SECOND += "3. `reversed(numbers)` gives an iterator, no copy"


def _tokens(text: str) -> list[str]:
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def take(page: Page, path: Path) -> None:
    """Hold the two-question conversation on a fresh server and save the page to `path`."""
    engine = FakeEngine(tokens=_tokens(FIRST), token_delay=0.01)
    with serve(create_app(Settings(), engine)) as root:
        open_page(page, root)
        send(page, "How do I reverse a list in Python?")
        wait_reply(page)
        engine.tokens = _tokens(SECOND)
        send(page, "Which one should I use?")
        wait_reply(page)
        page.click("#settings summary")
        page.locator("#prompt").blur()
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path))


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE_FIGURE
    with chromium() as browser:
        context = new_context(browser)
        take(context.new_page(), path)
        context.close()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
