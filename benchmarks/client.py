"""One streamed request to an OpenAI-compatible server, timed chunk by chunk.

The server-sent events are parsed here rather than by a library so that each event is timed when its
bytes arrive, with no more work per chunk than splitting lines and one `json.loads`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks import records as kinds
from benchmarks.records import RequestRecord
from benchmarks.workloads import RequestSpec

CONTENT_KEYS = ("content", "reasoning_content", "reasoning", "tool_calls")


class SSEParser:
    """Incremental parser of a `text/event-stream`: bytes in, complete (event, data) pairs out."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        """Add received bytes; return the events they complete, as (event name, data)."""
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        events: list[tuple[bytes, bytes]] = []
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                if self._data:
                    events.append((self._event, b"\n".join(self._data)))
                self._event, self._data = b"", []
            elif line.startswith(b"data:"):
                self._data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b"event:"):
                self._event = line[6:].strip()
        return events


@dataclass
class ApiConfig:
    """How requests are sent: to which endpoint, which model, with which extras."""

    base_url: str
    model: str
    api: str = "completions"  # or "chat"
    continuous_usage: bool = True  # ask vLLM-style servers for usage in every chunk
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return "/chat/completions" if self.api == "chat" else "/completions"

    def payload(self, spec: RequestSpec) -> dict[str, Any]:
        """The JSON body of the request for `spec`."""
        body: dict[str, Any] = {"model": self.model, "stream": True, "max_tokens": spec.max_tokens}
        if self.api == "chat":
            body["messages"] = spec.messages
        else:
            body["prompt"] = spec.prompt
        if spec.temperature is not None:
            body["temperature"] = spec.temperature
        if spec.ignore_eos:
            body["ignore_eos"] = True
        options: dict[str, bool] = {"include_usage": True}
        if self.continuous_usage:
            options["continuous_usage_stats"] = True
        body["stream_options"] = options
        body.update(self.extra_body)
        return body


def has_content(choice: Mapping[str, Any], api: str) -> bool:
    """Whether a streamed choice carries generated text (a role-only chat delta does not)."""
    if api != "chat":
        return bool(choice.get("text"))
    delta = choice.get("delta") or {}
    return any(delta.get(key) for key in CONTENT_KEYS)


class StreamReader:
    """Accumulates the timings of one stream into a RequestRecord.

    A chunk's tokens are the growth of its cumulative `usage.completion_tokens` when the server
    reports usage per chunk, else 1.
    """

    def __init__(self, record: RequestRecord, api: str) -> None:
        self.record = record
        self.api = api
        self.done = False
        self._counted = 0  # completion tokens reported so far

    def on_event(self, event: bytes, data: bytes, at: float) -> None:
        """Account for one server-sent event that arrived at `at`."""
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            self._fail(kinds.PROTOCOL, data[:200].decode(errors="replace"))
            return
        if event == b"error" or "error" in chunk:
            self._fail(kinds.STREAM_ERROR, json.dumps(chunk.get("error", chunk))[:500])
            return
        usage = chunk.get("usage")
        new_tokens = 1
        if usage:
            cumulative = usage.get("completion_tokens") or 0
            new_tokens = cumulative - self._counted
            self._counted = cumulative
            self.record.completion_tokens = cumulative
            self.record.prompt_tokens = usage.get("prompt_tokens", self.record.prompt_tokens)
        choices = chunk.get("choices") or []
        if choices and has_content(choices[0], self.api):
            self.record.chunk_times.append(at)
            self.record.chunk_tokens.append(new_tokens)

    def _fail(self, kind: str, detail: str) -> None:
        if self.record.error is None:
            self.record.error, self.record.error_detail = kind, detail


async def send_request(
    client: httpx.AsyncClient, config: ApiConfig, spec: RequestSpec
) -> RequestRecord:
    """Send one streamed request and record when each chunk of generated text arrived.

    Never raises for a failed request: the failure is recorded in `RequestRecord.error`.
    """
    body = config.payload(spec)
    record = RequestRecord(send_time=time.perf_counter())
    reader = StreamReader(record, config.api)
    try:
        async with client.stream("POST", config.path, json=body) as response:
            if response.status_code >= 400:
                detail = (await response.aread())[:500].decode(errors="replace")
                record.error, record.error_detail = kinds.http_error(response.status_code), detail
            else:
                parser = SSEParser()
                async for data in response.aiter_bytes():
                    at = time.perf_counter()
                    for event, payload in parser.feed(data):
                        reader.on_event(event, payload, at)
                    if record.error is not None:
                        break
                if record.error is None and not reader.done:
                    record.error = kinds.INCOMPLETE
    except httpx.TimeoutException as exc:
        record.error, record.error_detail = kinds.TIMEOUT, repr(exc)
    except (httpx.TransportError, OSError) as exc:
        # Connection refused or reset, and a server that dies mid-stream (RemoteProtocolError).
        record.error, record.error_detail = kinds.CONNECTION, repr(exc)
    record.end_time = time.perf_counter()
    return record


def make_client(
    base_url: str,
    pool_size: int,
    timeout_s: float,
    api_key: str | None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An HTTP/1.1 client with `pool_size` connections, so requests never queue inside the client.

    It ignores proxy environment variables: a proxy between the harness and the server would be
    measured too. `transport`, if given, wraps the connection (tests check every response).
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/"),
        headers=headers,
        http1=True,
        http2=False,
        limits=httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size),
        timeout=httpx.Timeout(timeout_s),
        trust_env=False,
        transport=transport,
    )


async def discover_model(client: httpx.AsyncClient) -> str:
    """The first model the server lists at GET /models."""
    response = await client.get("/models")
    response.raise_for_status()
    models = response.json().get("data") or []
    if not models:
        raise LookupError("the server lists no models: pass --model")
    return str(models[0]["id"])
