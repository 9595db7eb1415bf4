"""Per-key rate limits: requests and tokens per window, in-process or shared through Redis.

`feature` wires them in: the middleware counts requests, and the limiter it offers is
what the engine's admission reserves tokens against (`create_app` connects the two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.middleware import Middleware

from oai_server.features import Feature
from oai_server.limits.backends import Backend, MemoryBackend, RedisBackend
from oai_server.limits.limiter import RateLimiter
from oai_server.limits.middleware import RateLimitMiddleware

if TYPE_CHECKING:
    from oai_server.state import ServerState

__all__ = [
    "Backend",
    "MemoryBackend",
    "RateLimitMiddleware",
    "RateLimiter",
    "RedisBackend",
    "feature",
]


def feature(state: ServerState) -> Feature[RateLimiter | None]:
    """The limiter `--rate-limit-rpm` and `--rate-limit-tpm` ask for (None: no limits); its
    backend's connections closed at the end."""
    settings = state.settings
    if settings.rate_limit_rpm is None and settings.rate_limit_tpm is None:
        return Feature(None)
    backend: Backend = (
        MemoryBackend() if settings.redis_url is None else RedisBackend(settings.redis_url)
    )
    limiter = RateLimiter(
        backend,
        rpm=settings.rate_limit_rpm,
        tpm=settings.rate_limit_tpm,
        window_s=settings.rate_limit_window,
        metrics=state.metrics,
    )
    return Feature(
        limiter,
        middleware=[Middleware(RateLimitMiddleware, limiter=limiter)],
        stop=backend.close,
    )
