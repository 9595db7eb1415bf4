"""The one small interface every cache backend offers: bytes in, bytes out, with a TTL.

A backend never raises to its caller: a store that is down or slow is a miss, counted
and logged by the backend, and the answer comes from the engine as if no cache existed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class CacheBackend(ABC):
    """Where encoded entries live; each entry expires `ttl` seconds after it was stored."""

    @abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The entry under `key`, or None (absent, expired, or the store unreachable)."""

    @abstractmethod
    async def set(self, key: str, value: bytes) -> None:
        """Store `value` under `key`; a failure is counted and logged, never raised."""

    async def claim(self, key: str) -> bool:
        """Claim answering `key` for this replica; False: another replica is answering it.

        True whenever in doubt (one replica only, the store unreachable): a claim never
        stops a request from being answered, it only saves duplicate engine work.
        """
        return True

    async def claimed(self, key: str) -> bool:
        """True while another replica's claim on `key` stands."""
        return False

    async def release(self, key: str) -> None:  # noqa: B027 - nothing to release in one replica
        """Give up this replica's claim on `key` (answered, or failed)."""

    def bytes_held(self) -> int:
        """Bytes of entries this process holds (0 where the store is elsewhere)."""
        return 0

    async def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release connections; the backend is not used afterwards."""
