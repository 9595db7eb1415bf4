"""The zero-cost OpenAI-like streaming server: a raw ASGI app sending SSE bytes built in advance.

It lists one model at `GET /v1/models` and answers `POST /v1/completions` and
`POST /v1/chat/completions` (streamed only) with `max_tokens` tokens of " tok", reporting usage
per chunk when asked, as vLLM does. The events of each shape of stream (a role chunk for chat,
the token chunks, a finish chunk, a usage chunk, `[DONE]`) are built once and reused, each sent
as its own ASGI message, as a real server sends them as the engine produces them.

One app, two uses:
- the harness's stub (`python -m benchmarks stub`, the harness tests): a scripted pace (a first
  token delay, a delay per token), several tokens per chunk, scripted failures, and usage that
  counts the prompt's words;
- the floor (`floor`'s `raw` app): no pace and a fixed prompt count, so what a request costs is
  only the ASGI server's own work (parsing HTTP, writing chunks), the floor under any framework.
Every response of one shape has the same id and timestamp; no client of either looks.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
SendMessage = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, SendMessage], Awaitable[None]]

ROUTES = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


@dataclass(frozen=True)
class StubConfig:
    """The stub's pace, faults and usage; all zero: the floor."""

    first_token_delay: float = 0.02  # after the role chunk (chat), before the first token
    token_delay: float = 0.005  # per token: a chunk of k tokens comes k delays after the last
    tokens_per_chunk: int = 1
    fail_every: int = 0  # every n-th request gets HTTP 500 (0: never)
    model: str = "stub"
    # The usage's prompt tokens: this many; None: the prompt's words, counted per request.
    prompt_tokens: int | None = None


@functools.lru_cache(maxsize=256)
def sse_events(
    api: str,
    model: str,
    max_tokens: int,
    *,
    continuous: bool,
    usage: bool,
    tokens_per_chunk: int = 1,
    prompt_tokens: int = 30,
) -> list[bytes]:
    """The SSE events of one streamed response, `[DONE]` included."""
    base = {
        "id": "chatcmpl-stub" if api == "chat" else "cmpl-stub",
        "object": "chat.completion.chunk" if api == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
    }

    def event(choices: list[dict[str, Any]], done: int, with_usage: bool) -> bytes:
        chunk: dict[str, Any] = {**base, "choices": choices}
        if with_usage:
            chunk["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": done,
                "total_tokens": prompt_tokens + done,
            }
        return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()

    def choice(text: str | None, finish: str | None = None) -> dict[str, Any]:
        # `logprobs` is required (null) in both chunk shapes of OpenAI's spec.
        if api == "chat":
            delta = {} if text is None else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    events = []
    if api == "chat":
        role = {"role": "assistant", "content": ""}
        first = {"index": 0, "delta": role, "logprobs": None, "finish_reason": None}
        events.append(event([first], 0, continuous))
    for done in range(0, max_tokens, tokens_per_chunk):
        step = min(tokens_per_chunk, max_tokens - done)
        events.append(event([choice(" tok" * step)], done + step, continuous))
    events.append(event([choice(None, "length")], max_tokens, continuous))
    if usage:
        events.append(event([], max_tokens, True))
    events.append(b"data: [DONE]\n\n")
    return events


def create_stub_app(config: StubConfig | None = None) -> ASGIApp:
    """The ASGI app of a stub server with `config`."""
    settings = config or StubConfig()
    paced = bool(settings.first_token_delay or settings.token_delay)
    requests = 0

    async def app(scope: Scope, receive: Receive, send: SendMessage) -> None:
        nonlocal requests
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"] == "/v1/models":
            model = {"id": settings.model, "object": "model", "created": 0, "owned_by": "stub"}
            await send_json(send, 200, {"object": "list", "data": [model]})
            return
        api = ROUTES.get(scope["path"])
        if scope["method"] != "POST" or api is None:
            await send_json(send, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        request = json.loads(await read_body(receive))
        requests += 1
        if settings.fail_every and requests % settings.fail_every == 0:
            await send_json(
                send, 500, {"error": {"message": "scripted failure", "type": "server_error"}}
            )
            return
        options = request.get("stream_options") or {}
        max_tokens = int(request.get("max_tokens") or 16)
        events = sse_events(
            api,
            settings.model,
            max_tokens,
            continuous=bool(options.get("continuous_usage_stats")),
            usage=bool(options.get("include_usage")),
            tokens_per_chunk=settings.tokens_per_chunk,
            prompt_tokens=(
                _prompt_words(api, request)
                if settings.prompt_tokens is None
                else settings.prompt_tokens
            ),
        )
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        if paced:
            await _paced(send, events, api == "chat", max_tokens, settings)
            return
        for body in events[:-1]:
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": events[-1], "more_body": False})

    return app


async def _paced(
    send: SendMessage, events: list[bytes], role: bool, max_tokens: int, settings: StubConfig
) -> None:
    """`events` at the pace of `settings`: the role chunk at once, the first token after
    `first_token_delay`, each further chunk its tokens' delays after the one before."""
    chunks = iter(events)
    if role:
        await send({"type": "http.response.body", "body": next(chunks), "more_body": True})
    await asyncio.sleep(settings.first_token_delay)
    for done in range(0, max_tokens, settings.tokens_per_chunk):
        if done:
            step = min(settings.tokens_per_chunk, max_tokens - done)
            await asyncio.sleep(settings.token_delay * step)
        await send({"type": "http.response.body", "body": next(chunks), "more_body": True})
    *tail, last = chunks
    for body in tail:
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": last, "more_body": False})


def _prompt_words(api: str, request: dict[str, Any]) -> int:
    if api == "chat":
        return sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
    return len(str(request.get("prompt", "")).split())


async def serve_lifespan(receive: Receive, send: SendMessage) -> None:
    """Answer the ASGI lifespan protocol: nothing to start or stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def read_body(receive: Receive) -> bytes:
    """The whole body of an HTTP request."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_json(send: SendMessage, status: int, payload: Any) -> None:
    """A complete JSON response."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
