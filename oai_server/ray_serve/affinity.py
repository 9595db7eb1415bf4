"""Which replica a request should prefer: where its prefix is likely cached (no Ray here).

In order: the request's `prompt_cache_key`; the replica that served the response its
`previous_response_id` names, or its `conversation`'s latest turn (learned from the
answers that went by, else read from the store, where each replica records itself);
its `conversation`; else the first characters of its prompt (the system prompt and the
first turns, which every later turn of a conversation repeats). A key is placed on a
consistent-hash ring of the replicas, so a replica joining or leaving moves only the
keys next to it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# About the first blocks of a chat prompt: a system prompt of a few hundred tokens, or
# the first turns. The gateway has no tokenizer, so characters stand in for tokens.
PREFIX_CHARS = 1024
# Points per replica on the ring: with 64 the keys split within a few percent.
RING_POINTS = 64
# A replica holding a key's prefix keeps the key's next request while, with it, the
# replica's requests in flight are within this factor of the average, rounded up. At light
# load it always does; on two replicas, 16 conversations may split 9 to 7 at most (1.25,
# the usual factor for many replicas, lets them split 10 to 6).
BOUND = 1.1
# Response ids remembered (each a few dozen bytes): the last turns of many conversations.
LEARNED_RESPONSES = 100_000
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]+)"')
_CONVERSATION_ID = re.compile(rb'"conversation"\s*:\s*\{\s*"id"\s*:\s*"(conv_[A-Za-z0-9_-]+)"')


@dataclass(frozen=True)
class RouteHint:
    """What the router needs of a request: a key to hash, or a replica to stick to."""

    key: str | None = None
    replica: str | None = None  # the replica that served the previous turn, if known
    # `replica` only, whatever its load: a relayed socket's session lives there.
    pinned: bool = False


@dataclass(frozen=True)
class Route:
    """What a request body says about where it belongs."""

    key: str | None = None  # the affinity key for the ring
    previous: str | None = None  # the stored object whose replica served the last turn
    by_cache_key: bool = False  # the client named its cache: no need to ask the store


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _conversation(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else None


def _prompt_text(doc: dict[str, Any]) -> str:
    """The start of what the model will read, in the order the chat template puts it.

    Only the first items are written out: a long conversation's history past the first
    `PREFIX_CHARS` would cost the gateway time on every turn (0.75 ms at 190 KB).
    """
    pieces: list[str] = []
    size = 0
    for part in (doc.get(name) for name in ("instructions", "messages", "input", "prompt")):
        for item in part if isinstance(part, list) else [part]:
            if item is None:
                continue
            pieces.append(json.dumps(item, sort_keys=True, ensure_ascii=False))
            size += len(pieces[-1])
            if size >= PREFIX_CHARS:
                return "".join(pieces)[:PREFIX_CHARS]
    return "".join(pieces)


def route_of(doc: dict[str, Any]) -> Route:
    """The request's affinity key, and the response or conversation it continues."""
    previous = doc.get("previous_response_id")
    conversation = _conversation(doc.get("conversation"))
    continues = previous if isinstance(previous, str) else conversation
    cache_key = doc.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return Route("key:" + cache_key, continues, by_cache_key=True)
    if conversation is not None:
        return Route("conversation:" + conversation, continues)
    text = _prompt_text(doc)
    if len(text) < PREFIX_CHARS:
        # Shorter than the blocks worth keeping together: any replica will do.
        return Route(None, continues)
    return Route("prefix:" + hashlib.sha256(text.encode()).hexdigest(), continues)


def parse(body: bytes) -> Route:
    """The route of a request body; an unreadable body gets none (the replica refuses it)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return Route()
    return route_of(doc) if isinstance(doc, dict) else Route()


class ResponseReplicas:
    """Which replica answered each recent response and conversation (least recent forgotten)."""

    def __init__(self, size: int = LEARNED_RESPONSES) -> None:
        self.size = size
        self._replicas: OrderedDict[str, str] = OrderedDict()

    def learn(self, first_bytes: bytes, replica: str) -> None:
        """Note the response id (and its conversation's) at the start of an answer (JSON or
        `response.created`)."""
        for pattern in (_RESPONSE_ID, _CONVERSATION_ID):
            found = pattern.search(first_bytes)
            if found is not None:
                self.remember(found.group(1).decode(), replica)

    def remember(self, object_id: str, replica: str) -> None:
        self._replicas[object_id] = replica
        self._replicas.move_to_end(object_id)
        while len(self._replicas) > self.size:
            self._replicas.popitem(last=False)

    def get(self, object_id: str) -> str | None:
        return self._replicas.get(object_id)

    def hint(self, body: bytes) -> RouteHint:
        """The hint for a request body from what was learned (no store)."""
        route = parse(body)
        replica = None if route.previous is None else self.get(route.previous)
        return RouteHint(key=route.key, replica=replica)


class HashRing:
    """Consistent hashing: a key belongs to the first replica point at or after its hash."""

    def __init__(self, replicas: Iterable[str], points: int = RING_POINTS) -> None:
        ring = sorted((_digest(f"{r}#{i}"), r) for r in replicas for i in range(points))
        self._hashes = [h for h, _ in ring]
        self._owners = [r for _, r in ring]

    def owner(self, key: str) -> str | None:
        if not self._owners:
            return None
        index = bisect.bisect_left(self._hashes, _digest(key)) % len(self._hashes)
        return self._owners[index]


def within_bound(load: int, loads: list[int]) -> bool:
    """Whether a replica with `load` requests in flight may take one more, `loads` being
    every replica's: consistent hashing with bounded loads (Mirrokni, Thorup and
    Zadimoghaddam, 2018), `BOUND` times the average with the new request counted."""
    return load + 1 <= math.ceil(BOUND * (sum(loads) + 1) / len(loads))
