"""A request with no key at all, where keys are configured: 401 in Anthropic's shape, as
docs/api/anthropic.md says (a wrong key is in test_errors.py)."""

from __future__ import annotations

import httpx

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import KEY, MODEL, server


def test_no_key_at_all_is_401_in_anthropics_shape() -> None:
    engine = FakeEngine(reply="ok")
    body = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}
    with server(engine, api_key=[KEY]) as root:
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            refused = httpx.post(f"{root}{path}", json=body)
            assert refused.status_code == 401, path
            assert refused.json()["type"] == "error"
            assert refused.json()["error"]["type"] == "authentication_error"
    assert engine.calls == []
