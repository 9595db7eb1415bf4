"""A minimal OpenAI-like streaming server as a raw ASGI app: a target that costs next to nothing.

It lists one model at `GET /v1/models` and answers `POST /v1/completions` and
`POST /v1/chat/completions` (streamed only) with `max_tokens` tokens of " tok", at a scripted
pace, reporting usage per chunk when asked, as vLLM does. It serves to check the harness itself
(tests, `python -m benchmarks stub`), and as the raw-ASGI baseline when measuring what a web
framework costs.
"""

from __future__ import annotations

import asyncio
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


@dataclass
class StubConfig:
    """The stub's pace and faults."""

    first_token_delay: float = 0.02  # after the role chunk (chat), before the first token
    token_delay: float = (
        0.005  # per token; a chunk of k tokens comes k delays after the previous one
    )
    tokens_per_chunk: int = 1
    fail_every: int = 0  # every n-th request gets HTTP 500 (0: never)
    model: str = "stub"


class _Counter:
    def __init__(self) -> None:
        self.requests = 0


def create_stub_app(config: StubConfig | None = None) -> ASGIApp:
    """The ASGI app of a stub server with `config`."""
    settings = config or StubConfig()
    counter = _Counter()

    async def app(scope: Scope, receive: Receive, send: SendMessage) -> None:
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
            await send_json(
                send, 404, {"error": {"message": "not found", "type": "not_found_error"}}
            )
            return
        body = await read_body(receive)
        counter.requests += 1
        if settings.fail_every and counter.requests % settings.fail_every == 0:
            await send_json(
                send, 500, {"error": {"message": "scripted failure", "type": "server_error"}}
            )
            return
        await _stream(send, api, json.loads(body), settings)

    return app


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


def _prompt_tokens(api: str, request: dict[str, Any]) -> int:
    if api == "chat":
        return sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
    return len(str(request.get("prompt", "")).split())


async def _stream(
    send: SendMessage, api: str, request: dict[str, Any], settings: StubConfig
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    created = int(time.time())
    base = {
        "id": "cmpl-stub",
        "object": "chat.completion.chunk" if api == "chat" else "text_completion",
        "created": created,
        "model": settings.model,
    }
    options = request.get("stream_options") or {}
    prompt = _prompt_tokens(api, request)
    total = int(request.get("max_tokens") or 16)

    async def emit(choices: list[dict[str, Any]], done: int, usage: bool) -> None:
        chunk: dict[str, Any] = {**base, "choices": choices}
        if usage:
            chunk["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": done,
                "total_tokens": prompt + done,
            }
        await send(
            {
                "type": "http.response.body",
                "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                "more_body": True,
            }
        )

    def choice(text: str, finish: str | None = None) -> dict[str, Any]:
        # `logprobs` is required (null) in both chunk shapes of OpenAI's spec.
        if api == "chat":
            return {
                "index": 0,
                "delta": {"content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

    continuous = bool(options.get("continuous_usage_stats"))
    if api == "chat":
        await emit(
            [choice("") | {"delta": {"role": "assistant", "content": ""}}],
            0,
            continuous,
        )
    await asyncio.sleep(settings.first_token_delay)
    done = 0
    while done < total:
        step = min(settings.tokens_per_chunk, total - done)
        if done:
            await asyncio.sleep(settings.token_delay * step)
        done += step
        await emit([choice(" tok" * step)], done, continuous)
    await emit([choice("", "length")], done, continuous)
    if options.get("include_usage"):
        await emit([], done, True)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
