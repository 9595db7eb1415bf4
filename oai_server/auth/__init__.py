"""API keys: who may call the server, and the short id logs and metrics name them by.

The keys' middleware writes who is calling into the request's scope; every part reads
it with `oai_server.caller`. `feature` wires the keys in.
"""

from __future__ import annotations

from starlette.middleware import Middleware

from oai_server.auth.keys import KeyRing, key_id, load_keys
from oai_server.auth.middleware import AuthMiddleware
from oai_server.features import Feature
from oai_server.http.open_paths import OpenPaths
from oai_server.secret import ServerSecret
from oai_server.settings import Settings

__all__ = ["AuthMiddleware", "KeyRing", "feature", "key_id", "load_keys"]


def feature(settings: Settings, secret: ServerSecret, is_open: OpenPaths) -> Feature[None]:
    """A key on every route but `is_open`'s, when `--api-key`, `--admin-api-key` or a keys
    file gives any; each named by its id under `secret`."""
    keys = load_keys([*settings.api_key, *settings.admin_api_key], settings.api_keys_file, secret)
    if not keys:
        return Feature(None)
    return Feature(None, middleware=[Middleware(AuthMiddleware, keys=keys, is_open=is_open)])
