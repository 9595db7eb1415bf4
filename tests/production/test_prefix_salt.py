"""Each API key's prompts stay out of the other keys' prefix cache (vLLM's `cache_salt`).

The fake engine reports cached tokens as vLLM does, and only between calls of one salt;
the real engine's side (salts keep blocks apart) is tests/integration/test_prefix_cache.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import websockets

from oai_server.engine.fake import FakeEngine
from oai_server.generation.salt import salt_for
from tests.conformance import async_validating_client
from tests.keys import served_key_id
from tests.live import serve_async
from tests.production.conftest import MODEL, make_app, new_key
from tests.realtime.conftest import EVENTS_TIMEOUT_S, checked

# Long enough for several whole blocks of the fake tokenizer's tokens.
PROMPT = "You answer questions about the weather in Lisbon. " * 8


def _body(**extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": "Hi"}]
    return {"model": MODEL, "messages": messages, "max_tokens": 2, **extra}


async def _cached(http: httpx.AsyncClient, key: str, path: str, body: dict[str, Any]) -> int:
    response = await http.post(path, json=body, headers={"authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    return int(details["cached_tokens"])


async def test_two_keys_never_share_a_prefix_and_each_hits_its_own() -> None:
    a, b = new_key(), new_key()
    engine = FakeEngine(prefix_cache=True)
    async with (
        serve_async(make_app(engine, api_key=[a, b])) as root,
        async_validating_client(base_url=root) as http,
    ):
        chat = "/v1/chat/completions"
        assert await _cached(http, a, chat, _body()) == 0
        assert await _cached(http, b, chat, _body()) == 0  # a's blocks are not b's
        assert await _cached(http, a, chat, _body()) > 0
        assert await _cached(http, b, chat, _body(prompt_cache_key="weather")) > 0
        # A salt of the request's own narrows its key's cache, and cannot reach another's.
        assert await _cached(http, a, chat, _body(cache_salt=served_key_id(b))) == 0
        responses = {"model": MODEL, "instructions": PROMPT, "input": "Hi", "store": False}
        assert await _cached(http, b, "/v1/responses", responses) > 0
    assert {call.options.cache_salt for call in engine.calls} == {
        served_key_id(a),
        served_key_id(b),
        f"{served_key_id(a)}:{served_key_id(b)}",
    }


async def test_a_realtime_session_is_salted_with_its_key() -> None:
    key = new_key()
    engine = FakeEngine()
    async with serve_async(make_app(engine, api_key=[key])) as root:
        url = root.replace("http://", "ws://") + "/v1/realtime?model=" + MODEL
        headers = {"authorization": f"Bearer {key}"}
        async with websockets.connect(url, additional_headers=headers) as ws:
            assert checked(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps({"type": "response.create"}))
            async with asyncio.timeout(EVENTS_TIMEOUT_S):
                while checked(await ws.recv())["type"] != "response.done":
                    pass
    assert [call.options.cache_salt for call in engine.calls] == [served_key_id(key)]


async def test_shared_prefix_cache_lets_keys_share_blocks() -> None:
    a, b = new_key(), new_key()
    engine = FakeEngine(prefix_cache=True)
    app = make_app(engine, api_key=[a, b], prefix_cache_shared=True)
    async with serve_async(app) as root, async_validating_client(base_url=root) as http:
        assert await _cached(http, a, "/v1/chat/completions", _body()) == 0
        assert await _cached(http, b, "/v1/chat/completions", _body()) > 0


def test_a_salt_is_the_key_first_then_the_requests_own() -> None:
    assert salt_for("key-a", None, shared=False) == "key-a"
    assert salt_for("key-a", "s", shared=False) == "key-a:s"
    assert salt_for(None, "s", shared=False) == "s"
    assert salt_for("key-a", "s", shared=True) == "s"
