"""Whether the store answers: what `/health` reports, apart from the engine's health."""

from __future__ import annotations

from typing import Literal


class StoreHealth:
    def __init__(self) -> None:
        self.ok = True
        self.last_error: str | None = None

    def fail(self, exc: BaseException) -> None:
        self.ok = False
        self.last_error = type(exc).__name__

    def recover(self) -> None:
        self.ok = True
        self.last_error = None

    @property
    def status(self) -> Literal["ok", "degraded"]:
        return "ok" if self.ok else "degraded"
