"""The real engine's prefix cache, salted: blocks are shared only under one `cache_salt`.

The server salts every request with its API key's id (tests/production/test_prefix_salt.py
checks that mapping with the fake engine); here the session's server, without keys, is
sent the salts themselves, so the engine's side is checked without starting another one.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration


def _cached(http: httpx.Client, path: str, body: dict[str, Any]) -> int:
    response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    return int(details["cached_tokens"])


def test_each_salt_has_its_own_prefix_cache(server: Server) -> None:
    # Unique to this run, so no earlier test's blocks match; a few hundred tokens long.
    system = f"Session {uuid.uuid4()}. " + "You answer questions about the weather. " * 40
    chat: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}],
        "max_tokens": 1,
        "prompt_cache_key": "weather",
    }
    with httpx.Client(
        base_url=server.base_url, transport=ValidatingTransport(), timeout=60
    ) as http:
        assert _cached(http, "/chat/completions", {**chat, "cache_salt": "tenant-a"}) == 0
        assert _cached(http, "/chat/completions", {**chat, "cache_salt": "tenant-b"}) == 0
        assert _cached(http, "/chat/completions", {**chat, "cache_salt": "tenant-a"}) > 200
        response: dict[str, Any] = {
            "model": MODEL,
            "instructions": system,
            "input": "Hi",
            "max_output_tokens": 16,
            "store": False,
            "prompt_cache_key": "weather",
            "cache_salt": "tenant-b",
        }
        # The Responses API renders the same system prompt: tenant-b's blocks, not a's.
        assert _cached(http, "/responses", response) > 200
