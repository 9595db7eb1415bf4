"""Which replica a request should prefer: where its prefix is likely cached (no Ray here).

In order: the request's `prompt_cache_key`; the replica that served the response its
`previous_response_id` names (learned from the answers that went by); its `conversation`;
else the first characters of its prompt (the system prompt and the first turns, which
every later turn of a conversation repeats). A key is placed on a consistent-hash ring
of the replicas, so a replica joining or leaving moves only the keys next to it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
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
# Response ids remembered (each a few dozen bytes): the last turns of many conversations.
LEARNED_RESPONSES = 100_000
_RESPONSE_ID = re.compile(rb'"id"\s*:\s*"(resp_[A-Za-z0-9_-]+)"')


@dataclass(frozen=True)
class RouteHint:
    """What the router needs of a request: a key to hash, or a replica to stick to."""

    key: str | None = None
    replica: str | None = None  # the replica that served the previous turn, if known


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _conversation(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else None


def _prompt_text(doc: dict[str, Any]) -> str:
    """The start of what the model will read, in the order the chat template puts it."""
    parts: list[Any] = [doc.get("instructions"), doc.get("messages"), doc.get("input")]
    parts.append(doc.get("prompt"))
    text = json.dumps([p for p in parts if p is not None], sort_keys=True, ensure_ascii=False)
    return text[:PREFIX_CHARS]


def route_key(doc: dict[str, Any]) -> tuple[str | None, str | None]:
    """The request's affinity key, and the previous response it continues (if any)."""
    previous = doc.get("previous_response_id")
    previous = previous if isinstance(previous, str) else None
    cache_key = doc.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return "key:" + cache_key, previous
    conversation = _conversation(doc.get("conversation"))
    if conversation is not None:
        return "conversation:" + conversation, previous
    text = _prompt_text(doc)
    if len(text) < PREFIX_CHARS:
        # Shorter than the blocks worth keeping together: any replica will do.
        return None, previous
    return "prefix:" + hashlib.sha256(text.encode()).hexdigest(), previous


class ResponseReplicas:
    """Which replica answered each recent response id (least recently seen forgotten)."""

    def __init__(self, size: int = LEARNED_RESPONSES) -> None:
        self.size = size
        self._replicas: OrderedDict[str, str] = OrderedDict()

    def learn(self, first_bytes: bytes, replica: str) -> None:
        """Note the response id at the start of an answer (JSON or `response.created`)."""
        found = _RESPONSE_ID.search(first_bytes)
        if found is None:
            return
        self._replicas[found.group(1).decode()] = replica
        while len(self._replicas) > self.size:
            self._replicas.popitem(last=False)

    def hint(self, body: bytes) -> RouteHint:
        """The hint for a request body; an unreadable body gets none (the replica refuses it)."""
        try:
            doc = json.loads(body)
        except ValueError:
            return RouteHint()
        if not isinstance(doc, dict):
            return RouteHint()
        key, previous = route_key(doc)
        replica = None if previous is None else self._replicas.get(previous)
        return RouteHint(key=key, replica=replica)


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
