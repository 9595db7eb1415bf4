"""Deadlines and circuit breakers for the services the server depends on (Redis, the database).

`within` bounds one call; a `Breaker` marks a dependency down after it fails or hangs, so
requests stop waiting on it, and probes it in the background until it answers again;
`Dependencies` holds the breakers by name for `/health` and `oai_dependency_up`.
"""

from __future__ import annotations

from oai_server.resilience.breaker import (
    Breaker,
    DependencyDownError,
    abandoned_unwound,
    within,
)
from oai_server.resilience.dependencies import Dependencies

__all__ = ["Breaker", "Dependencies", "DependencyDownError", "abandoned_unwound", "within"]
