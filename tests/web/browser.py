"""Debian's Chromium driven by Playwright, and helpers to use the chat page like a person.

Playwright's own browser download is out of reach (and CI runs offline), so the installed
`chromium` executable is launched instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

VIEWPORT = {"width": 1100, "height": 720}
# How long a page waits for what must come (the page loaded, a reply finished). Playwright's
# 30 s default was exceeded loading the page on a 2-core machine with its memory taken by
# other engines (load average 22, nothing left for the page cache): generous, far below the
# test's own timeout, and never the measure of anything.
WAIT_MS = 120_000
# The page is idle again (Send, not Stop) and the last reply carries its figures.
REPLY_DONE = """() => !document.getElementById('send').hidden
  && document.querySelector('#messages .msg.assistant:last-child .stats .total') !== null"""


@contextmanager
def chromium() -> Iterator[Browser]:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise RuntimeError("chromium is not installed: run `make test` (it installs it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def new_context(browser: Browser) -> BrowserContext:
    """A fresh context (empty local storage) at the suite's viewport and waits."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(WAIT_MS)
    # `expect()` has a wait of its own (5 s), which the context's does not change.
    expect.set_options(timeout=WAIT_MS)
    return context


def open_page(page: Page, root: str) -> None:
    """Load the chat page and wait until it has listed the models."""
    page.goto(root + "/")
    page.wait_for_function("() => document.querySelector('#model').options.length > 0")


def send(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def wait_reply(page: Page) -> str:
    """Wait for the last reply to finish; return its text."""
    page.wait_for_function(REPLY_DONE)
    return page.inner_text(".msg.assistant:last-child .content")
