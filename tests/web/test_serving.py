"""The page's files come from the package at `/` and `/ui/`; a setting turns them off."""

from __future__ import annotations

import re

import httpx

from oai_server.engine.fake import FakeEngine
from oai_server.web import ASSETS_PATH
from oai_server.web.page import STATIC_DIR
from tests.conformance import ValidatingTransport
from tests.web.conftest import Serve


def test_the_page_and_its_assets_are_served(live: Serve) -> None:
    with live(FakeEngine(), api_key="k") as root:
        page = httpx.get(f"{root}/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert '<script type="module" src="ui/js/main.js">' in page.text
        for asset in sorted(STATIC_DIR.rglob("*.js")) + sorted(STATIC_DIR.rglob("*.css")):
            path = asset.relative_to(STATIC_DIR).as_posix()
            response = httpx.get(f"{root}{ASSETS_PATH}/{path}")
            assert response.status_code == 200, path  # open even with --api-key
            assert response.headers["cache-control"] == "no-cache"
        assert (
            httpx.get(f"{root}/ui/js/main.js").headers["content-type"].startswith("text/javascript")
        )
        # The API keeps its key.
        with httpx.Client(transport=ValidatingTransport()) as client:
            assert client.get(f"{root}/v1/models").status_code == 401


def test_the_page_can_be_turned_off(live: Serve) -> None:
    with live(FakeEngine(), web_ui=False) as root:
        assert httpx.get(f"{root}/").status_code == 404
        assert httpx.get(f"{root}/ui/js/main.js").status_code == 404


def test_the_page_is_self_contained() -> None:
    """Nothing is fetched from the network, and no text is ever parsed as HTML."""
    for asset in STATIC_DIR.rglob("*"):
        if asset.is_file():
            text = asset.read_text()
            assert re.search(r"https?://", text) is None, asset.name
            html_sinks = r"innerHTML|outerHTML|insertAdjacentHTML|document\.write"
            assert re.search(html_sinks, text) is None
    for module in STATIC_DIR.rglob("*.js"):
        for source in re.findall(r'from "([^"]+)"', module.read_text()):
            assert source.startswith("./"), (module.name, source)
