"""The floor of an OpenAI-like streaming server: raw ASGI sending SSE bytes built in advance.

Per request it reads and parses the JSON body, then sends the events a streamed chat completion
(or completion) of `max_tokens` tokens consists of -- a role chunk (chat), one chunk per token
with usage, a finish chunk, a usage chunk, `[DONE]` -- each as its own ASGI message, as a real
server sends them as the engine produces them. The bytes of each shape are built once and
reused, so what a request costs is only the ASGI server's own work: parsing HTTP and writing
chunks. Every response has the same id and timestamp; no client of the floor looks.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

from benchmarks.stub_server import (
    ROUTES,
    ASGIApp,
    Receive,
    Scope,
    SendMessage,
    read_body,
    send_json,
    serve_lifespan,
)

PROMPT_TOKENS = 30  # reported in usage; the floor does not tokenize
HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


@functools.lru_cache(maxsize=64)
def sse_events(api: str, model: str, max_tokens: int, continuous: bool, usage: bool) -> list[bytes]:
    """The SSE events of one streamed response, `[DONE]` included."""
    base = {
        "id": "chatcmpl-floor" if api == "chat" else "cmpl-floor",
        "object": "chat.completion.chunk" if api == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
    }

    def event(choices: list[dict[str, Any]], done: int, with_usage: bool) -> bytes:
        chunk: dict[str, Any] = {**base, "choices": choices}
        if with_usage:
            chunk["usage"] = {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": done,
                "total_tokens": PROMPT_TOKENS + done,
            }
        return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()

    def choice(text: str | None, finish: str | None = None) -> dict[str, Any]:
        if api == "chat":
            delta = {} if text is None else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    events = []
    if api == "chat":
        role = {"role": "assistant", "content": ""}
        first = {"index": 0, "delta": role, "logprobs": None, "finish_reason": None}
        events.append(event([first], 0, continuous))
    events += [event([choice("tok")], i + 1, continuous) for i in range(max_tokens)]
    events.append(event([choice(None, "length")], max_tokens, continuous))
    if usage:
        events.append(event([], max_tokens, True))
    events.append(b"data: [DONE]\n\n")
    return events


def create_raw_app(model: str) -> ASGIApp:
    """The raw app, listing `model` at /v1/models and answering both streaming endpoints."""

    async def app(scope: Scope, receive: Receive, send: SendMessage) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"] == "/v1/models":
            listed = {"id": model, "object": "model", "created": 0, "owned_by": "floor"}
            await send_json(send, 200, {"object": "list", "data": [listed]})
            return
        api = ROUTES.get(scope["path"])
        if scope["method"] != "POST" or api is None:
            await send_json(send, 404, {"error": {"message": "not found", "type": "not_found"}})
            return
        request = json.loads(await read_body(receive))
        options = request.get("stream_options") or {}
        events = sse_events(
            api,
            model,
            int(request.get("max_tokens") or 16),
            bool(options.get("continuous_usage_stats")),
            bool(options.get("include_usage")),
        )
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        for body in events[:-1]:
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": events[-1], "more_body": False})

    return app
