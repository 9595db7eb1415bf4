"""Runs batches: one runner per replica, one replica per batch (a lease on its row).

A runner claims the active batches no live runner holds, validates each, answers its lines
(those not already finished: a restart resumes), and writes the output and error files with
the final state in one transaction. Its lease is renewed while it works; a replica that dies
stops renewing, and another takes the batch over when the lease runs out.

Bulk never slows the chat: a line is admitted only while the engine has nothing queued (no
request, interactive or batch, waiting for its first token). While no interactive request
has been in flight for `idle_s`, up to `max_in_flight_idle` lines run at once, so an idle
engine is used; else at most `max_in_flight`, and when an interactive request arrives, the
youngest lines beyond that are handed back (aborted in the engine, run again later), so
interactive requests find few batch requests beside them and none queued. That hand-back
comes before the interactive request reaches the engine (`BatchLines.make_room`, which the
admission step awaits first): the lines' aborts reach the engine core ahead of the request,
so its first step is shared with the small cap's lines, not the idle cap's. Under
`--scheduling-policy priority` the lines also run at the lowest priority, so the engine
schedules every interactive request first.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from oai_server.batch.endpoints import Endpoint
from oai_server.batch.hand_back import BatchLines, mark_line
from oai_server.batch.lines import (
    NOT_NOW,
    Request,
    Shape,
    answer_line,
    expired_line,
    read_requests,
)
from oai_server.batch.metrics import BatchMetrics
from oai_server.batch.records import BatchRecords, Line, StoredFile, now_us
from oai_server.batch.traces import LineTraces
from oai_server.generation.service_tier import BATCH_PRIORITY
from oai_server.ids import new_id
from oai_server.observability.usage import BATCH_OWNER
from oai_server.resilience import Breaker, DependencyDownError
from schemas.batch import BatchErrors

logger = logging.getLogger(__name__)

T = TypeVar("T")

POLL_S = 1.0
ADMIT_POLL_S = 0.01
# Deadlines of the runner's database calls, through the store's breaker (so a hung
# database is marked down for every user of the store, and the batch is resumed later).
CALL_S = 10.0  # a row or a line: off the request path, as the store's queued writes
FILE_S = 60.0  # a whole input file read, or the output files written with the final state


class BatchRunner:
    def __init__(
        self,
        records: BatchRecords,
        endpoints: Mapping[str, Endpoint],
        metrics: BatchMetrics,
        *,
        shape: Callable[[str], Shape],
        waiting: Callable[[], int],
        live: Callable[[], int],
        health: Callable[[], Awaitable[None]],
        breaker: Breaker,
        lines: BatchLines,
        max_in_flight_idle: int,
        idle_s: float,
        lease_s: float,
        priority: bool,
        traces: LineTraces | None = None,
    ) -> None:
        self.records = records
        self.traces = traces or LineTraces(None)
        # Its own, so a feature above this one may add its endpoint (`add_endpoint`).
        self.endpoints = dict(endpoints)
        self.shape = shape
        self.metrics = metrics
        self.waiting = waiting
        # The chat engine's requests in flight, this runner's lines among them.
        self.live = live
        self.health = health
        self.breaker = breaker
        # Its lines on the chat engine: what an interactive request hands back.
        self.chat_lines = lines
        self.max_in_flight = lines.max_in_flight
        self.max_in_flight_idle = max_in_flight_idle
        self.idle_s = idle_s
        self.lease_us = int(lease_s * 1_000_000)
        self.priority = priority
        self.name = secrets.token_hex(8)
        self.in_flight = 0
        # Of those, the lines on the chat engine (embeddings have an engine of their own).
        self.on_chat_engine = 0
        self.wake = asyncio.Event()
        self._driving: dict[str, asyncio.Task[None]] = {}

    def add_endpoint(self, url: str, endpoint: Endpoint) -> None:
        """Answer the lines of `url` too: how a feature above this one (Anthropic's
        `/v1/messages`) brings its endpoint, while the app is built."""
        self.endpoints[url] = endpoint

    async def run(self) -> None:
        """Claim and drive batches until cancelled; a database error is retried next round."""
        while True:
            try:
                # A database the store's breaker holds down is not asked every second.
                held = (
                    await self._db(self.records.claim(self.name, self.lease_us))
                    if self.breaker.up
                    else []
                )
                for batch_id in held:
                    if batch_id not in self._driving:
                        task = asyncio.create_task(self._drive(batch_id))
                        self._driving[batch_id] = task
                        task.add_done_callback(self._forget)
            except Exception as exc:  # noqa: BLE001 - the batch stays in the database
                logger.warning("batch runner: claim failed: %r", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self.wake.wait()
            self.wake.clear()

    def _forget(self, task: asyncio.Task[None]) -> None:
        for batch_id, driving in list(self._driving.items()):
            if driving is task:
                del self._driving[batch_id]

    async def stop(self) -> None:
        """Stop every batch where it is and hand it back: a restarted runner resumes it."""
        tasks = list(self._driving.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _drive(self, batch_id: str) -> None:
        try:
            await self._work(batch_id)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._db(self.records.release(batch_id, self.name)))
            raise
        except Exception as exc:  # noqa: BLE001 - left active: resumed in a later round
            # An engine loading or overloaded is expected, not worth a warning each round.
            not_now = isinstance(exc, NOT_NOW) or (
                isinstance(exc, ExceptionGroup) and exc.split(NOT_NOW)[1] is None
            )
            level = logging.DEBUG if not_now else logging.WARNING
            logger.log(level, "batch %s: %r (will resume)", batch_id, exc)

    async def _work(self, batch_id: str) -> None:
        body = await self._db(self.records.batch(batch_id, None))
        if body is None:
            return
        endpoint = self.endpoints[body["endpoint"]]
        content = await self._db(self.records.content(body["input_file_id"], None), FILE_S)
        if content is None:
            await self._fail(batch_id, body, "file_not_found", "The input file was deleted.")
            return
        owner = await self._db(self.records.owner(batch_id)) or ""
        shape = self.shape(owner)
        requests, errors = await read_requests(content, body["endpoint"], endpoint, owner, shape)
        if body["status"] == "validating":
            if errors:
                body["errors"] = BatchErrors(data=errors).model_dump(mode="json", exclude_none=True)
                await self._finish(batch_id, body, "failed", [])
                return
            body.update(status="in_progress", in_progress_at=now_us() // 1_000_000)
            body["request_counts"] = {"total": len(requests), "completed": 0, "failed": 0}
            if not await self._db(
                self.records.set_batch(batch_id, body, runner=self.name, only_from=("validating",))
            ):
                return  # cancelled meanwhile: the next round finalizes it
        if body["status"] == "in_progress":
            await self.health()  # not serving (loading, dead): resumed in a later round
            body["status"] = await self._answer(batch_id, body, requests, owner)
        lines = await self._db(self.records.lines(batch_id), FILE_S)
        final = {"cancelling": "cancelled", "in_progress": "completed"}.get(body["status"])
        if body["status"] == "expired":
            done = {line.position for line in lines}
            lines += [
                Line(r.position, True, expired_line(r.custom_id))
                for r in requests
                if r.position not in done
            ]
            final = "expired"
        if final is not None:
            await self._finish(batch_id, body, final, lines)

    async def _answer(
        self, batch_id: str, body: dict[str, Any], requests: list[Request], owner: str
    ) -> str:
        """Answer the lines not yet finished; the status the batch ends this phase in."""
        done = {line.position for line in await self._db(self.records.lines(batch_id), FILE_S)}
        todo = deque(r for r in requests if r.position not in done)
        endpoint = self.endpoints[body["endpoint"]]
        lines: set[asyncio.Task[None]] = set()
        try:
            async with asyncio.TaskGroup() as group:
                watch = group.create_task(self._watch(batch_id, body))
                while not watch.done() and (todo or lines):
                    if not todo:
                        # The last lines run; one handed back by `_yield` comes back to `todo`.
                        await self._drain(watch, lines)
                        lines = {t for t in lines if not t.done()}
                        continue
                    await self._admit(watch)
                    if watch.done():
                        break
                    request = todo.popleft()
                    # Counted now, not when the task first runs, so the next admission sees
                    # it; uncounted when done, even if cancelled before it ever ran.
                    shared = endpoint.shares_chat_engine
                    self.in_flight += 1
                    self.on_chat_engine += shared
                    task = group.create_task(self._line(batch_id, request, endpoint, owner))
                    if shared:
                        self.chat_lines.add(task, functools.partial(todo.appendleft, request))
                    task.add_done_callback(functools.partial(self._line_done, shared))
                    lines.add(task)
                    lines = {t for t in lines if not t.done()}
                for task in lines:
                    task.cancel()  # cancelled or expired: what finished is kept
                watch.cancel()
        except* LeaseLostError:
            raise asyncio.CancelledError from None
        return await self._status(batch_id, body)

    async def _status(self, batch_id: str, body: dict[str, Any]) -> str:
        """The batch's status as stored (what a cancel wrote), or `expired` past its window."""
        current = await self._db(self.records.batch(batch_id, None)) or body
        status = current["status"]
        if status == "in_progress" and now_us() // 1_000_000 >= current["expires_at"]:
            return "expired"
        if status == "cancelling":
            body["cancelling_at"] = current.get("cancelling_at")
        return str(status)

    def _interactive(self) -> bool:
        # The chat engine's requests in flight that are not this runner's lines.
        return self.chat_lines.arriving > 0 or self.live() > self.on_chat_engine

    def _idle(self) -> bool:
        """Whether no interactive request has been in flight for `idle_s`: a chat that
        pauses between requests keeps the small cap, rather than finding the idle cap's
        lines (and handing them back) at each request."""
        now = time.monotonic()
        if self._interactive():
            self.chat_lines.interactive_at = now
            return False
        return now - self.chat_lines.interactive_at >= self.idle_s

    def _full(self) -> bool:
        if self.waiting() > 0:
            return True
        cap = self.max_in_flight_idle if self._idle() else self.max_in_flight
        return self.in_flight >= cap

    def _yield(self) -> None:
        """Beside interactive requests, hand back the lines beyond the small cap that the
        idle engine took: the youngest first (the least work lost), aborted in the engine,
        and run again later. Else an interactive request would share every engine step with
        up to the idle cap's lines until they end, however long they are."""
        if self._interactive():
            self.chat_lines.hand_back()

    async def _admit(self, watch: asyncio.Task[None]) -> None:
        """Wait for room: fewer lines than the cap in flight (the idle cap once no interactive
        request has run for `idle_s`), and nothing queued in the engine."""
        # The engine's queue has no event to wait on: it is polled, cheaply, every 10 ms.
        while not watch.done() and self._full():
            self._yield()
            await asyncio.sleep(ADMIT_POLL_S)

    async def _drain(self, watch: asyncio.Task[None], lines: set[asyncio.Task[None]]) -> None:
        """Wait for a line to end (or the watch); polled while more lines run than the
        small cap, which interactive requests may make too many."""
        polled = self.chat_lines.beyond_cap()
        await asyncio.wait(
            [watch, *lines],
            timeout=ADMIT_POLL_S if polled else None,
            return_when=asyncio.FIRST_COMPLETED,
        )
        self._yield()

    def _line_done(self, shared: bool, task: asyncio.Task[None]) -> None:
        self.in_flight -= 1
        self.on_chat_engine -= shared
        self.chat_lines.remove(task)

    async def _line(self, batch_id: str, request: Request, endpoint: Endpoint, owner: str) -> None:
        mark_line()  # this task's own context: `make_room` lets its requests pass
        BATCH_OWNER.set(owner)  # whose usage the line's tokens are
        priority = BATCH_PRIORITY if self.priority else None
        with self.traces.line(batch_id, request.custom_id):
            failed, line = await answer_line(request, endpoint, owner, priority)
        # Answered: off the engine, so never handed back (and run again) while it is written.
        task = asyncio.current_task()
        if task is not None:
            self.chat_lines.remove(task)
        await self._db(self.records.add_line(batch_id, Line(request.position, failed, line)))
        self.metrics.line(failed, line)

    async def _db(self, work: Coroutine[Any, Any, T], deadline_s: float | None = None) -> T:
        """`work` on the database within `deadline_s` (else `CALL_S`); at once
        `DependencyDownError` while the breaker holds it down. Either leaves the batch to
        resume in a later round.

        Unlike `Breaker.call`, a call cut short is waited for while it unwinds: the runner
        is off the request path, and a stopping server must not close the database under a
        query of its still running (that hung the event loop's shutdown)."""
        if not self.breaker.up:
            work.close()
            raise DependencyDownError(self.breaker.name)
        try:
            async with asyncio.timeout(CALL_S if deadline_s is None else deadline_s):
                return await work
        except TimeoutError as exc:
            self.breaker.failed(exc, at_once=True)  # the store's users stop waiting on it too
            raise

    async def _watch(self, batch_id: str, body: dict[str, Any]) -> None:
        """Renew the lease; return when the batch is cancelled or expires."""
        while True:
            await asyncio.sleep(min(self.lease_us / 3_000_000, POLL_S))
            # A renewal later than the lease is worth nothing: another runner may hold it.
            renewal = self.records.renew(batch_id, self.name, self.lease_us)
            if not await self._db(renewal, min(CALL_S, self.lease_us / 3_000_000)):
                raise LeaseLostError(batch_id)
            if await self._status(batch_id, body) != "in_progress":
                return

    async def _fail(self, batch_id: str, body: dict[str, Any], code: str, message: str) -> None:
        body["errors"] = {"object": "list", "data": [{"code": code, "message": message}]}
        await self._finish(batch_id, body, "failed", [])

    async def _finish(
        self, batch_id: str, body: dict[str, Any], status: str, lines: list[Line]
    ) -> None:
        """Write the output and error files and the final state, in one transaction."""
        now = now_us()
        seconds = now // 1_000_000
        produced = []
        for failed, key in ((False, "output_file_id"), (True, "error_file_id")):
            chosen = [line.body for line in lines if line.failed == failed]
            if not chosen:
                continue
            content = "".join(_jsonl(line) for line in chosen).encode()
            file_id = new_id("file", "-")
            name = f"batch_{batch_id}_{'error' if failed else 'output'}.jsonl"
            produced.append(
                (StoredFile(file_id, "", "batch_output", name, len(content), now), content)
            )
            body[key] = file_id
        if status != "failed":
            body["finalizing_at"] = seconds
        body[f"{status}_at"] = seconds
        body["status"] = status
        counts = body.setdefault("request_counts", {"total": 0})
        counts["failed"] = sum(line.failed for line in lines)
        counts["completed"] = len(lines) - counts["failed"]
        if await self._db(self.records.finish(batch_id, self.name, body, produced), FILE_S):
            self.metrics.finished(status)
            self.traces.finished(batch_id)


def _jsonl(line: dict[str, Any]) -> str:
    return json.dumps(line, separators=(",", ":")) + "\n"


class LeaseLostError(Exception):
    """Another runner holds the batch now: this one stops, writing nothing more."""
