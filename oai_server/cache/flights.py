"""Single flight: identical misses that overlap run the engine once.

The first miss for a key leads: it runs the engine and publishes the encoded entry
(or None, if it failed or its client left). Misses for the same key that arrive
meanwhile follow: they wait for what the leader publishes, and run the engine
themselves only if it published nothing.
"""

from __future__ import annotations

import asyncio


class Flights:
    """The keys being answered by the engine right now, in this process."""

    def __init__(self) -> None:
        self._flights: dict[str, asyncio.Future[bytes | None]] = {}

    def lead(self, key: str) -> bool:
        """Become the leader for `key`; False when another request already is."""
        if key in self._flights:
            return False
        self._flights[key] = asyncio.get_running_loop().create_future()
        return True

    def pending(self, key: str) -> asyncio.Future[bytes | None] | None:
        """What a follower of `key` awaits (shielded: a follower leaving cancels nothing)."""
        flight = self._flights.get(key)
        return None if flight is None else asyncio.shield(flight)

    def land(self, key: str, data: bytes | None) -> None:
        """The leader's outcome for `key`: an encoded entry, or None when it has none."""
        flight = self._flights.pop(key, None)
        if flight is not None and not flight.done():
            flight.set_result(data)
