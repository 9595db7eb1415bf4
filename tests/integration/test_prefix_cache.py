"""The real engine's prefix cache, salted: blocks are shared only under one `cache_salt`;
`cached_tokens` as the engine counted them, on chat, completions and responses.

The server salts every request with its API key's id (tests/production/test_prefix_salt.py
checks that mapping with the fake engine); here the session's server, without keys, is
sent the salts themselves, so the engine's side is checked without starting another one.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

# vLLM's CPU backend caches whole blocks of at most this many tokens.
BLOCK_TOKENS_AT_MOST = 128


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


# Each API's request for `prompt`, and where its usage says how much of it was cached.
def _requests(prompt: str) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "chat": (
            "/chat/completions",
            {"messages": [{"role": "user", "content": prompt}], "max_tokens": 1},
        ),
        "completions": ("/completions", {"prompt": prompt, "max_tokens": 1}),
        "responses": ("/responses", {"input": prompt, "max_output_tokens": 16, "store": False}),
    }


def _usage_streamed(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The usage of a streamed answer: the last chunk's, or `response.completed`'s."""
    body = {**body, "stream": True}
    if path != "/responses":
        body["stream_options"] = {"include_usage": True}
    usage: dict[str, Any] = {}
    with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line.removeprefix("data: "))
            found = event.get("usage") or (event.get("response") or {}).get("usage")
            usage = found or usage
    return usage


def _counts(usage: dict[str, Any]) -> tuple[int, int]:
    """(prompt tokens, cached prompt tokens), in chat's or the Responses API's names."""
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    return int(usage.get("prompt_tokens") or usage["input_tokens"]), int(details["cached_tokens"])


@pytest.mark.parametrize("api", ["chat", "completions", "responses"])
def test_a_repeated_prompt_reports_its_cached_tokens_whole_and_streamed(
    server: Server, api: str
) -> None:
    prompt = f"Note {uuid.uuid4()}: " + "the shop opens at nine and closes at six. " * 30
    path, body = _requests(prompt)[api]
    body = {**body, "model": MODEL, "temperature": 0}
    with httpx.Client(
        base_url=server.base_url, transport=ValidatingTransport(), timeout=60
    ) as http:
        first = http.post(path, json=body)
        assert first.status_code == 200, first.text
        tokens, cached = _counts(first.json()["usage"])
        assert (tokens > 300, cached) == (True, 0)  # a prompt no request sent before
        again = http.post(path, json=body)
        assert again.status_code == 200, again.text
        assert _counts(again.json()["usage"])[0] == tokens
        hit = _counts(again.json()["usage"])[1]
        # Whole blocks of the prompt, all but the last one's tail (the engine recomputes the
        # last token): at most a block short of the prompt.
        assert 0 < tokens - hit <= BLOCK_TOKENS_AT_MOST, (tokens, hit)
        assert _counts(_usage_streamed(http, path, body)) == (tokens, hit)
