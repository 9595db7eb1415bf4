"""API-key ids as the servers the tests start name them."""

from __future__ import annotations

from oai_server.auth import key_id
from oai_server.secret import ServerSecret
from oai_server.settings import Settings


def served_key_id(key: str) -> str:
    """`key`'s id under the secret a test server loads (the session's data dir keeps it)."""
    settings = Settings()
    return key_id(key, ServerSecret.load(settings.secret_key, settings.data_dir))
