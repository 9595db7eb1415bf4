"""Single flight: identical misses that overlap run the engine once.

The first miss for a key leads: it runs the engine and lands its flight with the
encoded entry (or None, if it failed or its client left). Misses for the same key that
arrive meanwhile follow: they wait for what the leader lands, and run the engine
themselves only if it landed nothing.

Across replicas sharing Redis, a leader also claims the key there (`SET NX` with a
TTL, see `CacheBackend.claim`); a replica that finds it claimed polls for the entry
while the claim stands, and answers from the engine itself if the claim goes (its
owner failed, or took longer than the claim lasts).
"""

from __future__ import annotations

import asyncio


class Flight:
    """One leader's answer for a key, on its way."""

    def __init__(self, flights: dict[str, asyncio.Future[bytes | None]], key: str) -> None:
        self._flights = flights
        self._key = key
        self._future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        flights[key] = self._future

    @property
    def landed(self) -> bool:
        return self._future.done()

    def land(self, data: bytes | None) -> None:
        """Hand `data` to the followers; later calls do nothing."""
        if self._flights.get(self._key) is self._future:
            del self._flights[self._key]
        if not self._future.done():
            self._future.set_result(data)


class Flights:
    """The keys being answered by the engine right now, in this process."""

    def __init__(self) -> None:
        self._flights: dict[str, asyncio.Future[bytes | None]] = {}

    def lead(self, key: str) -> Flight | None:
        """Lead the flight for `key`; None when another request already does."""
        if key in self._flights:
            return None
        return Flight(self._flights, key)

    def pending(self, key: str) -> asyncio.Future[bytes | None] | None:
        """What a follower of `key` awaits (shielded: a follower leaving cancels nothing)."""
        flight = self._flights.get(key)
        return None if flight is None else asyncio.shield(flight)
