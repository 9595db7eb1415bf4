"""OpenAI's `service_tier`: which engine priority a request runs at, and the tier echoed.

`priority` (and its alias `fast`) runs ahead of `default` work, `flex` behind it (answered
live, but scheduled like batch lines), `auto`, `default` and `scale` as every request
without a tier. The tiers are engine priorities, so they need `--scheduling-policy
priority`: under `fcfs` vLLM refuses any priority (see `check_priority`), and the engine
serves every request in arrival order, so every tier is served as, and echoed as,
`default`: the echo says how the request was served (OpenAI's rule: "may be different from
the value set in the parameter"), not what it asked. A key left out of
`--service-tier-priority-keys` is served at `default` when it asks for `priority`, and
may not jump the queue with vLLM's own negative `priority` either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

from oai_server.errors import InvalidRequestError
from schemas.common import GenerationRequest
from schemas.responses import CreateResponse

ServedTier = Literal["priority", "default", "flex"]

# vLLM schedules the lowest value first, then by arrival. A request that names neither a
# tier nor a priority runs at 0; flex just ahead of batch lines, which come last of all.
PRIORITY_TIER = -1
FLEX_PRIORITY = 2**31 - 2
BATCH_PRIORITY = 2**31 - 1
_ENGINE_PRIORITY: dict[str | None, int] = {"priority": PRIORITY_TIER, "flex": FLEX_PRIORITY}
_SERVED: dict[str, ServedTier] = {"priority": "priority", "fast": "priority", "flex": "flex"}

Tiered = TypeVar("Tiered", bound=GenerationRequest | CreateResponse)


@dataclass(frozen=True)
class TierPolicy:
    """How this server serves the tiers: whether the engine schedules by priority, and
    which keys (by id) may ask for `priority` (None: every key)."""

    by_priority: bool
    priority_keys: frozenset[str] | None = None

    def may_jump(self, principal: str | None) -> bool:
        """Whether `principal` may run ahead of default work."""
        return self.priority_keys is None or principal in self.priority_keys

    def served(self, asked: str | None, principal: str | None) -> ServedTier | None:
        """The tier a request asking `asked` is served at (None: it asked none)."""
        if asked is None:
            return None
        tier = _SERVED.get(asked, "default")
        if not self.by_priority or (tier == "priority" and not self.may_jump(principal)):
            return "default"
        return tier

    def apply(self, req: Tiered, principal: str | None) -> Tiered:
        """`req` with its tier resolved to the one served, which the answer echoes."""
        if req.service_tier is not None:
            req.service_tier = self.served(req.service_tier, principal)
        own = getattr(req, "priority", None)
        if own is not None and own < 0 and not self.may_jump(principal):
            raise InvalidRequestError(
                "This API key may not ask for a 'priority' below 0.", param="priority"
            )
        return req


def engine_priority(req: GenerationRequest) -> int:
    """The engine priority of `req`: its own `priority` (vLLM's field), else its tier's."""
    if req.priority is not None:
        return req.priority
    return _ENGINE_PRIORITY.get(req.service_tier, 0)
