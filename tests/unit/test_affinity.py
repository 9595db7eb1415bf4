"""The affinity gateway's choices, without Ray: keys, learned response ids, the ring."""

from __future__ import annotations

import json
from typing import Any

from oai_server.ray_serve.affinity import (
    PREFIX_CHARS,
    HashRing,
    ResponseReplicas,
    Route,
    route_of,
    within_bound,
)

SYSTEM = "You are the assistant of a bakery in Porto. " * 40


def _chat(*turns: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": "user", "content": t} for t in turns]
    return {"model": "m", "messages": messages, **extra}


def test_keys_in_order_cache_key_then_conversation_then_prefix() -> None:
    keyed = route_of(_chat("hi", prompt_cache_key="k", conversation="c"))
    assert keyed == Route("key:k", "c", by_cache_key=True)
    in_conversation = route_of(_chat("hi", conversation={"id": "conv_1"}))
    assert in_conversation == Route("conversation:conv_1", "conv_1")
    first = route_of(_chat("hi")).key
    later = route_of(_chat("hi", "and bread?", "and cakes?")).key
    assert first is not None
    assert first.startswith("prefix:")
    assert later == first  # later turns repeat the first blocks
    other = {"model": "m", "messages": [{"role": "system", "content": "A fish shop. " * 99}]}
    assert route_of(other).key not in (None, first)
    # A short prompt has no blocks worth keeping together.
    assert route_of({"model": "m", "messages": [{"role": "user", "content": "hi"}]}) == Route()
    assert len(SYSTEM) > PREFIX_CHARS


def test_a_previous_response_goes_back_to_the_replica_that_answered_it() -> None:
    replicas = ResponseReplicas(size=3)
    replicas.learn(b'{"id":"resp_abc","object":"response"', "r1")
    created = b'event: response.created\ndata: {"response":{"id": "resp_def", '
    replicas.learn(created + b'"conversation": {"id": "conv_1"}', "r2")
    body = json.dumps({"model": "m", "input": "more", "previous_response_id": "resp_abc"})
    assert replicas.hint(body.encode()).replica == "r1"
    # A conversation's next turn goes where its latest turn ran.
    in_conversation = json.dumps({"model": "m", "input": "more", "conversation": "conv_1"})
    assert replicas.hint(in_conversation.encode()).replica == "r2"
    replicas.learn(b'{"id":"resp_ghi"}', "r1")  # size 3: the oldest is forgotten
    assert replicas.hint(body.encode()).replica is None
    assert replicas.hint(b"not json").key is None
    assert replicas.hint(b"[1, 2]").replica is None


def test_the_ring_moves_few_keys_when_a_replica_joins() -> None:
    keys = [f"key:{i}" for i in range(2000)]
    two, three = HashRing(["a", "b"]), HashRing(["a", "b", "c"])
    before = {k: two.owner(k) for k in keys}
    after = {k: three.owner(k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "c" for k in moved)  # keys move only to the new replica
    assert 0.2 < len(moved) / len(keys) < 0.45  # about a third, not a reshuffle
    share = sum(1 for k in keys if before[k] == "a") / len(keys)
    assert 0.4 < share < 0.6
    assert HashRing([]).owner("key:1") is None


def test_a_conversation_keeps_its_replica_until_that_replica_holds_more_than_its_share() -> None:
    # Light load: the holder always keeps the next turn.
    assert within_bound(0, [0, 0])
    assert within_bound(1, [1, 0])
    # Sixteen conversations on two replicas: a 9:7 split keeps (the holder has 8 of the
    # 15 in flight when its conversation's next turn comes), a 10:6 one moves a turn.
    assert within_bound(8, [8, 7])
    assert not within_bound(9, [9, 6])
    # One replica far busier than the rest gives way however few the requests.
    assert not within_bound(3, [3, 0, 0, 0])
    assert within_bound(3, [3, 3, 2, 3])
