"""Model output is text: HTML in a reply never becomes an element; markdown does, safely."""

from __future__ import annotations

from playwright.sync_api import Page

from oai_server.engine.fake import FakeEngine
from tests.web.browser import open_page, send, wait_reply
from tests.web.conftest import Serve

HOSTILE = (
    '<script>alert(1)</script> <img src=x onerror="window.pwned=1"> '
    "**<b onmouseover=alert(2)>bold</b>** `<i>` [x](javascript:alert(3))"
)

MARKDOWN = """A **bold** and *italic* word, `inline code` and a [link](https://example.com).

- first item
- second item

1. one
2. two

```python
def f():
    return "<not html>"
```
"""


def test_html_in_a_reply_stays_text(page: Page, live: Serve) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    engine = FakeEngine(tokens=[HOSTILE[i : i + 7] for i in range(0, len(HOSTILE), 7)])
    with live(engine) as root:
        open_page(page, root)
        send(page, '<img src=y onerror="window.pwned=2">')
        wait_reply(page)
        reply = page.locator(".msg.assistant .content")
        assert "<script>alert(1)</script>" in reply.inner_text()
        assert '<img src=x onerror="window.pwned=1">' in reply.inner_text()
        for tag in ("script", "img", "b", "i"):
            assert page.locator(f"#messages {tag}").count() == 0
        assert page.locator(".msg.user .content").inner_text().startswith("<img src=y")
        # A javascript: link is shown as its text, not as a link.
        assert page.locator(".msg.assistant .content a").count() == 0
        assert page.evaluate("() => window.pwned") is None
        assert not dialogs


def test_markdown_renders_as_elements(page: Page, live: Serve) -> None:
    engine = FakeEngine(tokens=[MARKDOWN[i : i + 5] for i in range(0, len(MARKDOWN), 5)])
    with live(engine) as root:
        open_page(page, root)
        send(page, "Show me markdown")
        wait_reply(page)
        content = page.locator(".msg.assistant .content")
        assert content.locator("strong").inner_text() == "bold"
        assert content.locator("em").inner_text() == "italic"
        assert content.locator("p code").inner_text() == "inline code"
        link = content.locator("a")
        assert link.get_attribute("href") == "https://example.com"
        assert link.get_attribute("rel") == "noopener noreferrer"
        assert content.locator("ul > li").all_inner_texts() == ["first item", "second item"]
        assert content.locator("ol > li").all_inner_texts() == ["one", "two"]
        code = content.locator("pre > code")
        assert code.get_attribute("data-lang") == "python"
        assert code.inner_text() == 'def f():\n    return "<not html>"'
