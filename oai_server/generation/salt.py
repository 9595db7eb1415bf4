"""Keep each API key's prompts out of the other keys' prefix cache.

A prefix cache shared by tenants is a side channel: a request whose prompt another
tenant sent a moment ago comes back faster (and reports cached tokens), so one key could
time another's prompts. vLLM shares cached blocks only between requests of the same
`cache_salt`, so every request is salted with its key's id, ahead of any salt the
request brings itself; one key's repeated prefixes still hit. `--prefix-cache-shared`
turns this off when every key belongs to one tenant.
"""

from __future__ import annotations


def salt_for(principal: str | None, own: str | None, *, shared: bool) -> str | None:
    """The salt of a request by `principal` that asked for salt `own`.

    A request's own salt can only narrow its key's cache, never reach another key's:
    the key id always comes first.
    """
    if shared or principal is None:
        return own
    return principal if own is None else f"{principal}:{own}"
