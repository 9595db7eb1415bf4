"""Usage per API key: tokens by key id, model, service tier and batch, counted in memory.

Every generation the instrumented engine finishes, and every embedding call, is added
here with one dictionary look-up and a few additions: `/metrics` renders the totals when
it is scraped (`oai_usage_*`), and the usage feature (`oai_server.usage`) snapshots what
they gained every few seconds, as the tallies of that minute, and stores those off the
request path.
The key is named by its id (`key-` and 12 hex digits, `oai_server.auth.key_id`), never
by the secret; the labels are bounded by the configured keys, the served models and the
tiers. A generation outside any HTTP request (a batch line) is billed to the owner its
runner names in `BATCH_OWNER`.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from oai_server.caller import PRINCIPAL
from oai_server.observability.context import RequestRecord

Kind = Literal["completions", "embeddings"]
# (kind, api_key_id, model, service_tier, batch); api_key_id "" when no keys are configured.
Group = tuple[str, str, str, str, bool]
# (the minute it happened in, as Unix seconds; its group).
Slot = tuple[int, Group]

# The owner ("" without keys) of the batch line the current task answers.
BATCH_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "oai_batch_owner", default=None
)
# Per-minute tallies kept for the store at most; beyond, new ones are dropped and counted.
MAX_PENDING = 50_000


@dataclass(slots=True)
class Tally:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def add(self, other: Tally) -> None:
        self.input_tokens += other.input_tokens
        self.cached_tokens += other.cached_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests


class UsageMeter(Collector):
    """The running totals (for `/metrics`), and per-minute tallies of them not yet stored."""

    def __init__(self) -> None:
        self.totals: dict[Group, Tally] = {}
        # What `snapshot` has already turned into tallies, per group.
        self._seen: dict[Group, Tally] = {}
        self.pending: dict[Slot, Tally] = {}
        self.dropped = 0

    def add(
        self,
        kind: Kind,
        record: RequestRecord | None,
        model: str,
        tier: str,
        input_tokens: int,
        cached_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        """Count one model request of `record`'s caller (a batch line's owner without one).

        On every request's path: two calls (this one and the key's look-up) and a few
        additions; the minute it belongs to is stamped by `snapshot`, every few seconds."""
        if record is not None:
            # `record.principal`, without its two calls (this runs for every request).
            try:
                key = record.scope["state"].get(PRINCIPAL) or ""
            except KeyError:
                key = ""
            batch = False
        else:
            owner = BATCH_OWNER.get()
            key, batch = owner or "", owner is not None
        group = (kind, key, model, tier, batch)
        try:
            total = self.totals[group]
        except KeyError:
            total = self.totals[group] = Tally()
        total.input_tokens += input_tokens
        total.cached_tokens += cached_tokens
        total.output_tokens += output_tokens
        total.requests += 1

    def snapshot(self, now: float | None = None) -> None:
        """Keep what the totals gained since the last snapshot as the tallies of the
        minute `now` (default: this one) falls in."""
        minute = int(time.time() if now is None else now) // 60 * 60
        for group, total in list(self.totals.items()):
            seen = self._seen.get(group)
            if seen is None:
                seen = self._seen[group] = Tally()
            if total.requests == seen.requests:
                continue
            delta = Tally(
                total.input_tokens - seen.input_tokens,
                total.cached_tokens - seen.cached_tokens,
                total.output_tokens - seen.output_tokens,
                total.requests - seen.requests,
            )
            seen.add(delta)
            self._keep((minute, group), delta)

    def _keep(self, slot: Slot, tally: Tally) -> None:
        kept = self.pending.get(slot)
        if kept is not None:
            kept.add(tally)
        elif len(self.pending) < MAX_PENDING:
            self.pending[slot] = tally
        else:
            self.dropped += tally.requests

    def take(self) -> dict[Slot, Tally]:
        """The tallies kept so far (a snapshot taken first), handed over to be stored."""
        self.snapshot()
        taken, self.pending = self.pending, {}
        return taken

    def put_back(self, taken: dict[Slot, Tally]) -> None:
        """Tallies that could not be stored, kept again for the next try (within the bound)."""
        for slot, tally in taken.items():
            self._keep(slot, tally)

    def collect(self) -> Iterator[CounterMetricFamily]:
        labels = ["api_key_id", "model", "service_tier", "batch"]
        tokens = CounterMetricFamily(
            "oai_usage_tokens",
            "Tokens used, by API key id, model, service tier, batch or not, and type "
            "(input, cached_input: of input, the prefix cache's; output).",
            labels=[*labels, "type"],
        )
        requests = CounterMetricFamily(
            "oai_usage_requests",
            "Model requests (engine generations, embedding calls), by API key id, model, "
            "service tier and batch or not.",
            labels=labels,
        )
        for (_, key, model, tier, batch), t in list(self.totals.items()):
            values = [key, model, tier, "true" if batch else "false"]
            tokens.add_metric([*values, "input"], t.input_tokens)
            tokens.add_metric([*values, "cached_input"], t.cached_tokens)
            tokens.add_metric([*values, "output"], t.output_tokens)
            requests.add_metric(values, t.requests)
        dropped = CounterMetricFamily(
            "oai_usage_dropped_requests",
            "Model requests whose usage was not stored: the store was away too long and the "
            "tallies waiting for it reached their bound (the counters above still have them).",
        )
        dropped.add_metric([], self.dropped)
        yield from (tokens, requests, dropped)
