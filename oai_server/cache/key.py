"""Which requests may be answered from the cache, and under which key.

Only a determined answer is cached: greedy decoding (temperature 0) or an explicit
seed. The key is a hash of everything that shapes the answer, taken from the request
as the engine sees it: the prompt's token ids (so two JSON spellings of the same
request, or two message forms that render alike, share an entry), the engine's
`SamplingOptions` with their defaults filled in, and the response-shaping fields the
options do not hold (tool parsing, echo, logprobs format, `n`, the endpoint), plus the
API key's principal unless entries are shared.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import pydantic_core

from oai_server.engine.types import SamplingOptions

# Bumped whenever what an entry holds, or what the key covers, changes.
KEY_VERSION = 1


def determined(options: Sequence[SamplingOptions]) -> bool:
    """True when every engine request will give the same answer each time it is asked."""
    return all(o.temperature == 0 or o.seed is not None for o in options)


_FLOATS = tuple(f.name for f in dataclasses.fields(SamplingOptions) if f.type in ("float", float))


def options_material(options: SamplingOptions) -> dict[str, Any]:
    """Every sampling parameter, defaults included, in a JSON-able form.

    Numbers are normalized (`0` and `0.0` are one temperature), and so is the order of
    `logit_bias`, which changes nothing.
    """
    material = dataclasses.asdict(options)
    for name in _FLOATS:
        material[name] = float(material[name])
    if options.logit_bias:
        material["logit_bias"] = sorted(
            (token, float(bias)) for token, bias in options.logit_bias.items()
        )
    return material


def cache_key(kind: str, principal: str | None, material: dict[str, Any]) -> str:
    """The key for an answer of endpoint `kind` to `material`, seen by `principal`."""
    document = {"v": KEY_VERSION, "kind": kind, "principal": principal, **material}
    digest = hashlib.sha256(pydantic_core.to_json(document)).hexdigest()
    return f"{kind}:{digest}"
