"""Serve the chat page: `/` is the page, `/ui/...` its assets (files of this package).

Both stay open when `--api-key` is set: the page holds no secret, and it asks the user
for the key when the API answers 401.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from oai_server.features import Feature
from oai_server.settings import Settings

STATIC_DIR = Path(__file__).parent / "static"
ASSETS_PATH = "/ui"
# What the app leaves open to all (`oai_server.http.open_paths`): the page and its files.
OPEN_PATHS = frozenset({"/"})
OPEN_PREFIXES = (ASSETS_PATH + "/",)

# The page runs only its own scripts and styles; it may talk to any API base URL.
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src *; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
# Revalidated on each load (ETags make that cheap), so an upgraded server is never
# paired with stale cached modules.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


class _Assets(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(_HEADERS)
        return response


def feature(settings: Settings) -> Feature[None]:
    """The page at `/` and its files, unless `--no-web-ui`.

    Its routes come last: the API's routes take precedence over the page's paths.
    """
    if not settings.web_ui:
        return Feature(None)
    index = STATIC_DIR / "index.html"

    async def chat_page(request: Request) -> Response:
        return FileResponse(index, headers={**_HEADERS, "Content-Security-Policy": _CSP})

    return Feature(
        None,
        [
            Route("/", chat_page, methods=["GET"], include_in_schema=False),
            Mount(ASSETS_PATH, _Assets(directory=STATIC_DIR), name="web-ui"),
        ],
    )
