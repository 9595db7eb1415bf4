"""Which requests may be answered from the cache, and under which key.

Only a determined answer is cached: greedy decoding (temperature 0) or an explicit
seed. The key is a hash of everything that shapes the answer, taken from the request
as the engine sees it: the prompt's token ids, or for chat the rendered prompt they
encode (so two JSON spellings of the same request, or two message forms that render
alike, share an entry), the engine's `SamplingOptions` with their defaults filled in,
and the response-shaping fields the options do not hold (tool parsing, echo, logprobs
format, `n`, the endpoint), plus the API key's principal unless entries are shared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from collections.abc import Sequence
from typing import Any

import pydantic_core

from oai_server.engine.types import SamplingOptions

# Bumped whenever what an entry holds, or what the key covers, changes (2: a chat prompt
# is hashed as its rendered text; 3: a prompt's images by their digests).
KEY_VERSION = 3


def determined(options: Sequence[SamplingOptions]) -> bool:
    """True when every engine request will give the same answer each time it is asked."""
    return all(o.temperature == 0 or o.seed is not None for o in options)


# The prefix-cache salt changes where the engine keeps blocks, never the answer; whose
# entries a request may see is the key's `principal` (or every key's, when shared).
# The images are in the key by their digests (see `options_material`), not their pixels.
_NOT_IN_KEY = frozenset({"cache_salt", "images"})
_FIELDS = tuple(f.name for f in dataclasses.fields(SamplingOptions) if f.name not in _NOT_IN_KEY)
_FLOATS = frozenset(
    f.name for f in dataclasses.fields(SamplingOptions) if f.type in ("float", float)
)


def options_material(options: SamplingOptions) -> dict[str, Any]:
    """Every sampling parameter, defaults included, in a JSON-able form.

    Numbers are normalized (`0` and `0.0` are one temperature), and so is the order of
    `logit_bias`, which changes nothing. (Built field by field: `dataclasses.asdict`
    costs more than all the rest of the key.)
    """
    material = {
        name: float(getattr(options, name)) if name in _FLOATS else getattr(options, name)
        for name in _FIELDS
    }
    if options.logit_bias:
        material["logit_bias"] = sorted(
            (token, float(bias)) for token, bias in options.logit_bias.items()
        )
    if options.images:
        material["images"] = [image.digest for image in options.images]
    return material


def cache_key(
    kind: str,
    principal: str | None,
    prompts: Sequence[list[int] | str],
    material: dict[str, Any],
) -> str:
    """The key for an answer of endpoint `kind` to `prompts` and `material`, for `principal`.

    A prompt's text is hashed as UTF-8, a tenth of the bytes of its ids and no packing:
    for a chat prompt of 800 tokens, 1 µs where its ids took 10. Token ids are hashed as
    packed native 64-bit integers: much cheaper than as JSON, and `struct.pack` packs a
    list in half the time `array.array` takes. A tag tells the two apart.
    """
    document = {"v": KEY_VERSION, "kind": kind, "principal": principal, **material}
    digest = hashlib.sha256(pydantic_core.to_json(document))
    for prompt in prompts:
        if isinstance(prompt, str):
            tag, packed = b"t", prompt.encode("utf-8", "surrogatepass")
        else:
            tag = b"i"
            try:
                packed = struct.pack(f"={len(prompt)}q", *prompt)
            except struct.error:  # ids no engine has; the engine will refuse them
                packed = pydantic_core.to_json(prompt)
        digest.update(tag + len(packed).to_bytes(8, "little"))
        digest.update(packed)
    return f"{kind}:{digest.hexdigest()}"
