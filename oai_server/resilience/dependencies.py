"""The breakers of this server's dependencies, by name, as `/health` and metrics show them."""

from __future__ import annotations

from typing import Literal

from prometheus_client import CollectorRegistry, Gauge

from oai_server.resilience.breaker import Breaker


class Dependencies:
    """One breaker per dependency name: features that share a server share its breaker."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._breakers: dict[str, Breaker] = {}
        self._up = Gauge(
            "oai_dependency_up",
            "1 while a dependency answers within its deadlines; 0 while marked down "
            "(requests do not wait on it; a background probe brings it back).",
            ["dependency"],
            registry=registry,
        )

    def add(self, breaker: Breaker) -> Breaker:
        """Track `breaker`; if one of its name is tracked already, that one instead."""
        known = self._breakers.get(breaker.name)
        if known is not None:
            return known
        self._breakers[breaker.name] = breaker
        self._up.labels(breaker.name).set_function(lambda: float(breaker.up))
        return breaker

    def status(self) -> dict[str, Literal["ok", "down"]]:
        return {name: "ok" if b.up else "down" for name, b in sorted(self._breakers.items())}

    async def close(self) -> None:
        for breaker in self._breakers.values():
            await breaker.close()
