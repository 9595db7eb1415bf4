"""API keys: who may call the server, and the short id logs and metrics name them by.

`caller` answers who is calling, for every feature that asks; `feature` wires the keys in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.middleware import Middleware

from oai_server.auth.caller import caller
from oai_server.auth.keys import KeyRing, key_id, load_keys
from oai_server.auth.middleware import OPEN_PATHS, AuthMiddleware
from oai_server.features import Feature

if TYPE_CHECKING:
    from oai_server.state import ServerState

__all__ = ["OPEN_PATHS", "AuthMiddleware", "KeyRing", "caller", "feature", "key_id", "load_keys"]


def feature(state: ServerState) -> Feature[None]:
    """A key on every route but the open ones, when `--api-key` or a keys file gives any."""
    keys = load_keys(state.settings.api_key, state.settings.api_keys_file)
    if not keys:
        return Feature(None)
    return Feature(None, middleware=[Middleware(AuthMiddleware, keys=keys)])
