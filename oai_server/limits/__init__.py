"""Per-key rate limits: requests and tokens per window, in-process or shared through Redis."""

from oai_server.limits.backends import Backend, MemoryBackend, RedisBackend
from oai_server.limits.limiter import RateLimiter
from oai_server.limits.middleware import RateLimitMiddleware

__all__ = ["Backend", "MemoryBackend", "RateLimitMiddleware", "RateLimiter", "RedisBackend"]
