"""Serve's request router for the replicas: a conversation goes where its prefix is cached.

The gateway (`gateway.py`) reads each request and attaches a `RouteHint`; this router,
running in the gateway's process, sends the request to the hinted replica (the one that
served the previous turn, or the key's last request), else to the owner of the hint's
key on a consistent-hash ring. Load wins over affinity: past `target` ongoing requests
the preferred replica is passed over for the less loaded of two random ones (Serve's
default policy), so a burst spreads and a dead replica costs its conversations only
their cached prefixes. A key the gateway has not seen served has no cache it knows of:
it goes to its ring owner only while that replica is within `SPREAD` requests of the
least loaded (a hash puts 16 conversations 11 to 5 or worse on two replicas one time in
five, and the heavier replica's turns all wait), and then stays where it went while
that replica holds no more than its share of the requests in flight, `BOUND` times the
average (consistent hashing with bounded loads): conversations that end unevenly, or
that landed 10 to 6, move one at a time, each paying its prefix once, instead of
keeping one replica's turns waiting for the rest of their lives.
"""

from __future__ import annotations

import random
from typing import Any

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica

from oai_server.ray_serve.affinity import HashRing, RouteHint, within_bound

# How many more requests in flight than the least loaded replica a key's ring owner may
# hold and still take a key no replica has served yet.
SPREAD = 2


def _hint(request: PendingRequest | None) -> RouteHint | None:
    if request is None:
        return None
    for arg in [*request.args, *request.kwargs.values()]:
        if isinstance(arg, RouteHint):
            return arg
    return None


class CacheAffinityRouter(RequestRouter):
    """Prefer the replica a request's hint points at while it is below `target` load."""

    def initialize_state(self, target: float = 16.0, **kwargs: Any) -> None:
        self.target = target
        self._ring: tuple[frozenset[str], HashRing] | None = None

    def ring(self, replicas: list[RunningReplica]) -> HashRing:
        """The ring of the replicas now running (rebuilt only when they change)."""
        ids = frozenset(r.replica_id.unique_id for r in replicas)
        if self._ring is None or self._ring[0] != ids:
            self._ring = (ids, HashRing(ids))
        return self._ring[1]

    def preferred(
        self, replicas: list[RunningReplica], hint: RouteHint | None
    ) -> RunningReplica | None:
        """The replica that holds the hint's prefix while its load is within `BOUND` of
        the average, or the key's owner while it is not busier than the least loaded by
        `SPREAD` (a new key has no cache to lose yet)."""
        if hint is None:
            return None
        by_id = {r.replica_id.unique_id: r for r in replicas}
        loads = [self.load(r) for r in replicas]
        if hint.replica is not None and hint.replica in by_id:
            holder = by_id[hint.replica]
            return holder if within_bound(self.load(holder), loads) else None
        owner = None if hint.key is None else by_id.get(self.ring(replicas).owner(hint.key) or "")
        if owner is None or self.load(owner) >= min(loads) + SPREAD:
            return None
        return owner

    def load(self, replica: RunningReplica) -> int:
        """Ongoing requests as last seen (sends from here count at once); 0 if unknown."""
        return self.replica_queue_len_cache.get(replica.replica_id) or 0

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        hint = _hint(pending_request)
        if hint is not None and hint.pinned:
            # A relayed socket's message: its session is on that replica or nowhere.
            return [[r for r in candidate_replicas if r.replica_id.unique_id == hint.replica]]
        two = random.sample(candidate_replicas, min(2, len(candidate_replicas)))
        chosen = self.preferred(candidate_replicas, hint)
        if chosen is not None and self.load(chosen) < self.target:
            return [[chosen], two]
        return [two]
