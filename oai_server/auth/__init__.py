"""API keys: who may call the server, and the short id logs and metrics name them by."""

from oai_server.auth.keys import KeyRing, key_id, load_keys
from oai_server.auth.middleware import OPEN_PATHS, AuthMiddleware

__all__ = ["OPEN_PATHS", "AuthMiddleware", "KeyRing", "key_id", "load_keys"]
