"""Messages: `role: "system"` messages in `messages`, as Claude Code 2.1 sends them.

Anthropic's API takes instructions mid-conversation as system messages (its SDK's
`SystemMessageParam`); Claude Code's first request carries its environment in one. Until
this server took them, each of its turns began with a 400 and a second request.
"""

from __future__ import annotations

import httpx

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import KEY, MODEL, server


def prompt(engine: FakeEngine) -> str:
    return bytes(engine.calls[-1].prompt_token_ids).decode()


def post(root: str, messages: list[dict[str, object]]) -> httpx.Response:
    body = {"model": MODEL, "max_tokens": 8, "messages": messages}
    return httpx.post(f"{root}/v1/messages?beta=true", json=body, headers={"x-api-key": KEY})


def test_a_system_message_reaches_the_prompt_where_it_stands() -> None:
    engine = FakeEngine(reply="ok")
    with server(engine) as root:
        answer = post(
            root,
            [
                {"role": "user", "content": "first"},
                {"role": "system", "content": [{"type": "text", "text": "cwd is /w"}]},
                {"role": "user", "content": "second"},
            ],
        )
    assert answer.status_code == 200, answer.text
    assert "<|user|>first\n<|system|>cwd is /w\n<|user|>second" in prompt(engine)


def test_a_system_message_cleared_at_the_next_user_message_is_shown_until_then() -> None:
    engine = FakeEngine(reply="ok")
    note = {"role": "system", "content": "just this turn", "clear_at": "next_user_message"}
    with server(engine) as root:
        assert post(root, [{"role": "user", "content": "a"}, note]).status_code == 200
        assert "just this turn" in prompt(engine)
        later = [{"role": "user", "content": "a"}, note, {"role": "user", "content": "b"}]
        assert post(root, later).status_code == 200
        assert "just this turn" not in prompt(engine)
