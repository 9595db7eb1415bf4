"""The built-in chat page: plain HTML, CSS and JavaScript modules from this package.

The page is a client of the OpenAI API like any other (it streams `/v1/chat/completions`
over fetch), so it needs no route of its own beyond its files. `feature` serves them.
"""

from oai_server.web.page import ASSETS_PATH, OPEN_PATHS, OPEN_PREFIXES, feature

__all__ = ["ASSETS_PATH", "OPEN_PATHS", "OPEN_PREFIXES", "feature"]
