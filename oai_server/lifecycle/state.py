"""Serving, draining, dead: what the server is doing, and the two ways it ends.

SIGTERM (an orchestrator's stop): `/health` answers 503 at once so the load balancer
stops sending, new requests get 503 with `Retry-After`, the requests in flight may
finish for up to `drain_timeout` seconds, then whatever is left is aborted (each
stream gets an error event and `[DONE]`), the admission step refuses whatever else would
reach the engine (a batch line, a background response, a Realtime session's next turn),
and the process exits 0.

The engine dies (its process killed, say): `/health` answers 503, each request in
flight fails (an error event in a stream, a 503 otherwise), and the process exits
non-zero soon after, so whatever supervises it starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable

from oai_server.admission import Admission
from oai_server.errors import EngineDeadError
from oai_server.observability.engine import InstrumentedEngine

logger = logging.getLogger(__name__)

EXIT_ENGINE_DEAD = 3
# After the engine died: time for the failed requests' answers to reach their clients.
DEATH_GRACE_S = 1.0
# After the drain's aborts: time for the aborted requests' error events to go out.
ABORT_GRACE_S = 2.0
HEALTH_POLL_S = 0.2


class Phase(enum.Enum):
    SERVING = "serving"
    DRAINING = "draining"
    DEAD = "dead"


class Lifecycle:
    """The server's phase, its requests in flight, and how it asks its HTTP server to stop."""

    def __init__(
        self, engine: InstrumentedEngine, admission: Admission, drain_timeout: float
    ) -> None:
        """`engine`: the chat engine the drain cuts; `admission`: the step it closes as it
        cuts, so nothing new starts on an engine about to stop."""
        self.engine = engine
        self.admission = admission
        self.drain_timeout = drain_timeout
        self.phase = Phase.SERVING
        self.exit_code = 0
        self.in_flight = 0
        # Set by whoever runs the HTTP server (`__main__`): make it stop and return.
        self.request_exit: Callable[[], None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # --- requests in flight ---------------------------------------------------
    def enter(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    # --- the engine watchdog ----------------------------------------------------
    async def watch_engine(
        self, check: Callable[[], Awaitable[None]] | None = None, name: str = "engine"
    ) -> None:
        """Poll the engine's health once it is up; on death, fail fast and exit.

        `check` watches another engine (the embedding engine, `name`): when that one dies,
        the chat engine's requests in flight still have the drain timeout to finish.
        """
        self._loop = asyncio.get_running_loop()
        grace_s = DEATH_GRACE_S if check is None else self.drain_timeout
        check = check or self.engine.check_health
        while True:
            await asyncio.sleep(HEALTH_POLL_S)
            try:
                await check()
            except EngineDeadError as exc:
                await self._die(name, grace_s, str(exc))
                return
            except Exception:  # noqa: BLE001 - not ready yet: keep watching
                continue

    async def _die(self, name: str, grace_s: float, why: str) -> None:
        # `why` names the model whose engine died, when the server holds several.
        logger.error("the %s has died (%s): exiting with status %d", name, why, EXIT_ENGINE_DEAD)
        self.phase = Phase.DEAD
        self.exit_code = EXIT_ENGINE_DEAD
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace_s)
        self._exit()

    # --- SIGTERM --------------------------------------------------------------
    def drain_threadsafe(self) -> None:
        """Begin draining; callable from a signal handler."""
        if self._loop is None:
            self._exit()
            return
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        task = asyncio.get_running_loop().create_task(self.drain())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Refuse new work, let the requests in flight finish, abort the rest, exit."""
        if self.phase is not Phase.SERVING:
            return
        self.phase = Phase.DRAINING
        began = time.monotonic()
        logger.info(
            "draining: %d requests in flight, up to %.0f s", self.in_flight, self.drain_timeout
        )
        try:
            await asyncio.wait_for(self._idle.wait(), self.drain_timeout)
        except TimeoutError:
            logger.warning("drain timeout: aborting %d requests", self.in_flight)
            self.admission.close()
            await self.engine.abort_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), ABORT_GRACE_S)
        logger.info("drained in %.1f s", time.monotonic() - began)
        self._exit()

    def _exit(self) -> None:
        if self.request_exit is not None:
            self.request_exit()
