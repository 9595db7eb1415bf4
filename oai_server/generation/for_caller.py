"""A request shaped for its caller: salted for its key's prefix cache, its tier resolved.

Every way in that generates for a caller (chat, completions, Responses, a batch line)
shapes its request here, once, so the salt and the tier a request runs at never differ
by the door it came through (see `salt` and `service_tier` for why each is done).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from oai_server.generation.salt import salt_for
from oai_server.generation.service_tier import TierPolicy
from schemas.common import GenerationRequest
from schemas.responses import CreateResponse

Shaped = TypeVar("Shaped", bound=GenerationRequest | CreateResponse)


@dataclass(frozen=True)
class ForCaller:
    """How this server shapes a request for the key (`principal`) it came with."""

    tiers: TierPolicy
    # `--prefix-cache-shared`: every key shares one prefix cache (no salt added).
    prefix_cache_shared: bool = False

    def __call__(self, req: Shaped, principal: str | None) -> Shaped:
        """`req`, salted for `principal` (None: no keys) and served at its allowed tier."""
        req.cache_salt = salt_for(principal, req.cache_salt, shared=self.prefix_cache_shared)
        return self.tiers.apply(req, principal)
