"""Requests and tokens per key per window, and the headers that tell clients where they stand.

Tokens are counted up front, the prompt's plus the most the request may generate
(`max_tokens` x `n`), so a request that would pass the limit is refused before any
work; when it ends, the unused part of that reservation is given back.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from oai_server.errors import RateLimitError
from oai_server.limits.backends import Backend
from oai_server.observability.context import RequestRecord
from oai_server.observability.metrics import Metrics

ANONYMOUS = "anonymous"  # every caller, when the server has no keys


def format_reset(seconds: float) -> str:
    """OpenAI's duration style for `x-ratelimit-reset-*`: `20ms`, `1.5s`, `6m0s`, `1h0m0s`."""
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


@dataclass(frozen=True)
class Standing:
    """One limit's state for one key: what `x-ratelimit-*-<kind>` reports."""

    kind: str  # "requests" or "tokens"
    limit: int
    used: int
    reset_s: float

    def headers(self) -> dict[str, str]:
        return {name.decode(): value.decode() for name, value in self.raw_headers()}

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """`headers()` as ASGI sends them, on every answer: the names are made once."""
        limit, remaining, reset = HEADER_NAMES[self.kind]
        return [
            (limit, b"%d" % self.limit),
            (remaining, b"%d" % max(0, self.limit - self.used)),
            (reset, format_reset(self.reset_s).encode()),
        ]


# `x-ratelimit-{limit,remaining,reset}-<kind>`, per kind, encoded.
HEADER_NAMES = {
    kind: tuple(f"x-ratelimit-{part}-{kind}".encode() for part in ("limit", "remaining", "reset"))
    for kind in ("requests", "tokens")
}


class RateLimiter:
    """Per-principal limits on requests and tokens per `window_s`; None means no limit."""

    def __init__(
        self,
        backend: Backend,
        *,
        rpm: int | None,
        tpm: int | None,
        window_s: float,
        metrics: Metrics | None = None,
    ) -> None:
        self.backend = backend
        self.rpm = rpm
        self.tpm = tpm
        self.window_s = window_s
        self.metrics = metrics

    def _window(self) -> tuple[int, float]:
        """The current window's index and the seconds until the next one."""
        now = time.time()
        index = int(now // self.window_s)
        return index, (index + 1) * self.window_s - now

    def _key(self, kind: str, principal: str | None, window: int) -> str:
        return f"oai:ratelimit:{kind}:{principal or ANONYMOUS}:{window}"

    async def take_request(self, principal: str | None) -> Standing | None:
        """Count one request; raise `RateLimitError` if the key has none left."""
        if self.rpm is None:
            return None
        window, reset = self._window()
        key = self._key("requests", principal, window)
        taken, used = await self.backend.take(key, 1, self.rpm, self.window_s + 1)
        standing = Standing("requests", self.rpm, used, reset)
        if not taken:
            raise self._refusal(standing, 1, await self.tokens(principal))
        return standing

    async def tokens(self, principal: str | None) -> Standing | None:
        if self.tpm is None:
            return None
        window, reset = self._window()
        used = await self.backend.count(self._key("tokens", principal, window))
        return Standing("tokens", self.tpm, used, reset)

    async def reserve_tokens(self, record: RequestRecord | None, amount: int) -> None:
        """Reserve `amount` tokens for the request of `record`, or raise `RateLimitError`."""
        if self.tpm is None:
            return
        principal = None if record is None else record.principal
        window, reset = self._window()
        key = self._key("tokens", principal, window)
        taken, used = await self.backend.take(key, amount, self.tpm, self.window_s + 1)
        if not taken:
            raise self._refusal(Standing("tokens", self.tpm, used, reset), amount, None)
        if record is not None:
            if record.reserved_window not in (None, window):
                await self.settle(record)  # a batch that spans two windows: settle the first
            record.reserved_tokens += amount
            record.reserved_window = window

    async def settle(self, record: RequestRecord) -> None:
        """Give back what the request reserved but did not use."""
        if self.tpm is None or record.reserved_window is None:
            return
        unused = record.reserved_tokens - record.total_tokens
        if unused > 0:
            key = self._key("tokens", record.principal, record.reserved_window)
            await self.backend.add(key, -unused, self.window_s + 1)
        record.reserved_tokens, record.reserved_window = 0, None

    def _refusal(
        self, standing: Standing, requested: int, other: Standing | None
    ) -> RateLimitError:
        if self.metrics is not None:
            self.metrics.rate_limited.labels(standing.kind).inc()
        wait = max(standing.reset_s, 0.001)
        headers = {
            "Retry-After": str(math.ceil(wait)),
            "retry-after-ms": str(math.ceil(wait * 1000)),
            **standing.headers(),
            **(other.headers() if other is not None else {}),
        }
        unit = "requests" if standing.kind == "requests" else "tokens"
        error = RateLimitError(
            f"Rate limit reached on {unit} per window of {self.window_s:g} s: limit "
            f"{standing.limit}, used {standing.used}, requested {requested}. "
            f"Please try again in {format_reset(wait)}.",
            headers=headers,
        )
        error.type = standing.kind
        return error
