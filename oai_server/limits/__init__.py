"""Per-key rate limits: requests and tokens per window, in-process or shared through Redis.

`feature` wires them in: the middleware counts requests, and the limiter it offers is
what the admission step reserves tokens against (`create_app` builds it before the core,
and hands `reserve_tokens` to the core's `Admission` as it builds it).
"""

from __future__ import annotations

from starlette.middleware import Middleware

from oai_server.features import Feature
from oai_server.http.open_paths import OpenPaths
from oai_server.limits.backends import Backend, MemoryBackend, RedisBackend
from oai_server.limits.limiter import RateLimiter
from oai_server.limits.middleware import RateLimitMiddleware
from oai_server.observability.metrics import Metrics
from oai_server.resilience import Dependencies
from oai_server.settings import Settings

__all__ = [
    "Backend",
    "MemoryBackend",
    "RateLimitMiddleware",
    "RateLimiter",
    "RedisBackend",
    "feature",
]


def feature(
    settings: Settings, metrics: Metrics, dependencies: Dependencies, is_open: OpenPaths
) -> Feature[RateLimiter | None]:
    """The limiter `--rate-limit-rpm` and `--rate-limit-tpm` ask for (None: no limits),
    counting every path but `is_open`'s; its backend's connections closed at the end.

    It takes no core: the core's admission step admits each request against it.
    """
    if settings.rate_limit_rpm is None and settings.rate_limit_tpm is None:
        return Feature(None)
    backend: Backend = (
        MemoryBackend()
        if settings.redis_url is None
        else RedisBackend(settings.redis_url, dependencies)
    )
    limiter = RateLimiter(
        backend,
        rpm=settings.rate_limit_rpm,
        tpm=settings.rate_limit_tpm,
        window_s=settings.rate_limit_window,
        metrics=metrics,
    )
    return Feature(
        limiter,
        middleware=[Middleware(RateLimitMiddleware, limiter=limiter, is_open=is_open)],
        stop=backend.close,
    )
