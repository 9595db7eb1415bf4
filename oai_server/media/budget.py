"""Pixels being decoded at once, server-wide: a weighted semaphore.

A decoded image costs memory in proportion to its pixels (4 bytes each in RGB), whatever
its file's size: a PNG of 8 KB can declare 64 megapixels. Each decode holds its image's
declared pixels from one budget for as long as the full-size pixels live, so however many
requests send images at once, the server never decodes more than the budget at a time;
the others wait their turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class PixelBudget:
    """`total` pixels, held by decodes and given back when each is done."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._changed: anyio.Condition | None = None

    @property
    def free(self) -> int:
        """Pixels no decode holds now."""
        return self._free

    @asynccontextmanager
    async def hold(self, pixels: int) -> AsyncIterator[None]:
        """Hold `pixels` (at most the whole budget) while the body runs; wait until free."""
        pixels = min(pixels, self.total)
        if self._changed is None:  # made in the loop that uses it
            self._changed = anyio.Condition()
        changed = self._changed
        async with changed:
            while self._free < pixels:
                await changed.wait()
            self._free -= pixels
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with changed:
                    self._free += pixels
                    changed.notify_all()
