"""Who is calling: the one answer every feature reads (limits, cache keys, logs, the store)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Where `AuthMiddleware` puts the caller in the ASGI scope's state.
PRINCIPAL = "principal"


def caller(scope: Mapping[str, Any]) -> str | None:
    """The short id of the API key `scope` (an ASGI scope, or `request.scope`) carries;
    None when no keys are configured or the route is open to all."""
    principal: str | None = scope.get("state", {}).get(PRINCIPAL)
    return principal
