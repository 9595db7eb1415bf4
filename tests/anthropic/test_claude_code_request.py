"""Claude Code 2.1's first request, as it sends it (docs/api/compatibility.md#messages).

It posts through the SDK's beta client (`/v1/messages?beta=true` with `anthropic-beta`
values), streamed, with `max_tokens: 32000` whatever the context, adaptive thinking with its
display omitted, a context-management edit, an effort, a user id in `metadata`, and
`cache_control` on its system blocks and tools. Each was once a way to be refused.
"""

from __future__ import annotations

from typing import Any

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import MODEL, client, server

CONTEXT = 2048
TEMPLATE = (
    "[thinking={{ enable_thinking }} effort={{ reasoning_effort }}]"
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning_content %}[thought:{{ m.reasoning_content }}]{% endif %}"
    "{{ m.content }}\n{% endfor %}<|assistant|>"
)
BETAS: Any = [
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-management-2025-06-27",
    "prompt-caching-scope-2026-01-05",
]
EPHEMERAL: Any = {"type": "ephemeral"}
SYSTEM: Any = [
    {"type": "text", "text": "You are Claude Code.", "cache_control": EPHEMERAL},
    {"type": "text", "text": " Answer briefly.", "cache_control": EPHEMERAL},
]
BASH: Any = {
    "name": "Bash",
    "description": "Runs a command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
    "cache_control": EPHEMERAL,
}


def turns(*texts: str) -> Any:
    """A conversation of `texts`, user first; assistant turns carry their thinking."""
    out: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        if i % 2:
            thinking = {"type": "thinking", "thinking": f"thought {i}", "signature": "sig"}
            content: Any = [thinking, {"type": "text", "text": text}]
            out.append({"role": "assistant", "content": content})
        else:
            content = [{"type": "text", "text": text, "cache_control": EPHEMERAL}]
            out.append({"role": "user", "content": content})
    return out


def send(root: str, messages: Any) -> Any:
    sdk = client(root, timeout=30)
    stream = sdk.beta.messages.create(
        model=MODEL,
        max_tokens=32_000,
        betas=BETAS,
        system=SYSTEM,
        messages=messages,
        tools=[BASH],
        thinking={"type": "adaptive", "display": "omitted"},
        context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        output_config={"effort": "high"},
        metadata={"user_id": "user_abc_account_def_session_123"},
        stream=True,
    )
    return [event for event in stream]


def test_claude_codes_first_request_is_answered_to_the_end_of_the_context() -> None:
    fake = FakeEngine(max_model_len=CONTEXT, tokens=["ok "] * 4000, chat_template=TEMPLATE)
    with server(fake) as root:
        events = send(root, turns("List the files."))
        counted = client(root).beta.messages.count_tokens(
            model=MODEL,
            betas=BETAS,
            system=SYSTEM,
            messages=turns("List the files."),
            tools=[BASH],
            thinking={"type": "adaptive", "display": "omitted"},
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            output_config={"effort": "high"},
        )
    names = [event.type for event in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    delta = next(event for event in events if event.type == "message_delta")
    assert delta.delta.stop_reason == "max_tokens"
    call = fake.calls[-1]
    assert delta.usage.output_tokens == CONTEXT - len(call.prompt_token_ids)
    prompt = fake.tokenizer.decode(call.prompt_token_ids)
    assert prompt.startswith(
        "[thinking=True effort=high]<|system|>You are Claude Code. Answer briefly."
    )
    assert counted.input_tokens == len(call.prompt_token_ids)


def test_its_second_turn_keeps_every_thinking_it_asked_to_keep() -> None:
    fake = FakeEngine(max_model_len=CONTEXT, chat_template=TEMPLATE)
    with server(fake) as root:
        send(root, turns("one", "A", "two", "B", "three"))
    prompt = fake.tokenizer.decode(fake.calls[-1].prompt_token_ids)
    assert "[thought:thought 1]A" in prompt
    assert "[thought:thought 3]B" in prompt
