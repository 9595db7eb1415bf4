"""Who is calling: the one answer every part reads (limits, cache keys, logs, the store).

The API-keys feature (`oai_server.auth`) writes it into the ASGI scope; everything else
only reads it, here, so no part imports the keys feature to know its caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Where the keys' middleware puts the caller in the ASGI scope's state.
PRINCIPAL = "principal"


def caller(scope: Mapping[str, Any]) -> str | None:
    """The short id of the API key `scope` (an ASGI scope, or `request.scope`) carries;
    None when no keys are configured or the route is open to all."""
    principal: str | None = scope.get("state", {}).get(PRINCIPAL)
    return principal
