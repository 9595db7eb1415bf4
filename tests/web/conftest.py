"""One browser for the session; each test gets a fresh context (empty local storage)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve
from tests.web.browser import chromium, new_context

Serve = Callable[..., AbstractContextManager[str]]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Per module, not per session: Playwright's sync API keeps an event loop running in
    # this thread while it is open, which the asyncio tests of other modules cannot share.
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = new_context(browser)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture
def live() -> Serve:
    """`with live(engine, **settings) as root:` the app with `engine` behind a real uvicorn."""

    @contextmanager
    def run(engine: FakeEngine, **settings: Any) -> Iterator[str]:
        with serve(create_app(Settings(**settings), engine)) as root:
            yield root

    return run
