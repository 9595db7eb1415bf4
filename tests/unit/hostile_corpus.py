"""Requests a hostile-input run found mishandled: each with the answer it must get.

Run by `test_hostile.py` through the in-process app and the fake engine (every case),
and by the integration suite against the real engine (a few: the ones whose harm was
inside the engine). Bodies are raw JSON text, so NaN, Infinity and integers of any size
reach the server exactly as a client can send them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MODEL = "smollm2-135m-instruct"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
BIG = [2**64, 10**30]


@dataclass(frozen=True)
class HostileCase:
    """One request and the error it must get: status, `param` (None: any)."""

    name: str
    path: str
    body: str
    status: int = 400
    param: str | None = None

    def streamed(self) -> HostileCase:
        data = json.loads(self.body)
        data["stream"] = True
        return HostileCase(
            f"{self.name}-stream", self.path, json.dumps(data), self.status, self.param
        )


def chat(**fields: Any) -> str:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    body.update(fields)
    return json.dumps(body)


def completion(**fields: Any) -> str:
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 8}
    body.update(fields)
    return json.dumps(body)


def json_schema(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def tool(parameters: dict[str, Any], name: str = "f", strict: bool = False) -> dict[str, Any]:
    function = {"name": name, "parameters": parameters, **({"strict": True} if strict else {})}
    return {"type": "function", "function": function}


SCHEMA = "response_format.json_schema.schema"
ARRAY_BOMB = {"type": "array", "items": {"type": "integer"}, "minItems": 1_000_000_000}


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema}
    return schema


def _ref_bomb() -> dict[str, Any]:
    """Twenty definitions, each ten references to the next: 10**20 once expanded."""
    defs: dict[str, Any] = {
        f"d{i}": {"type": "array", "prefixItems": [{"$ref": f"#/$defs/d{i + 1}"}] * 10}
        for i in range(20)
    }
    defs["d20"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


# The grammar compiler: what one schema may ask of it.
SCHEMA_BOMBS = [
    HostileCase(
        "minItems-1e9",
        CHAT,
        chat(response_format=json_schema(ARRAY_BOMB)),
        400,
        f"{SCHEMA}.minItems",
    ),
    HostileCase(
        "minItems-1e9-completions",
        COMPLETIONS,
        completion(response_format=json_schema(ARRAY_BOMB)),
        400,
        f"{SCHEMA}.minItems",
    ),
    HostileCase(
        "maxLength-1e12",
        CHAT,
        chat(
            response_format=json_schema(
                {"type": "object", "properties": {"a": {"type": "string", "maxLength": 10**12}}}
            )
        ),
        400,
        f"{SCHEMA}.properties.a.maxLength",
    ),
    HostileCase(
        "minProperties-1e9",
        CHAT,
        chat(response_format=json_schema({"type": "object", "minProperties": 10**9})),
        400,
        f"{SCHEMA}.minProperties",
    ),
    HostileCase(
        "pattern-repeat",
        CHAT,
        chat(response_format=json_schema({"type": "string", "pattern": "(ab){1000000000}"})),
        400,
        f"{SCHEMA}.pattern",
    ),
    HostileCase(
        "range-1e300",
        CHAT,
        chat(response_format=json_schema({"type": "integer", "minimum": -1e300, "maximum": 1e300})),
        400,
        f"{SCHEMA}.minimum",
    ),
    HostileCase("nested-100", CHAT, chat(response_format=json_schema(_deep(100)))),
    HostileCase("ref-bomb", CHAT, chat(response_format=json_schema(_ref_bomb())), 400, SCHEMA),
    HostileCase(
        "ref-remote",
        CHAT,
        chat(response_format=json_schema({"$ref": "http://169.254.169.254/latest"})),
        400,
        f"{SCHEMA}.$ref",
    ),
    HostileCase(
        "ref-dangling",
        CHAT,
        chat(response_format=json_schema({"$ref": "#/$defs/missing"})),
        400,
        SCHEMA,
    ),
    HostileCase(
        "tool-minItems-1e9",
        CHAT,
        chat(
            tools=[tool({"type": "object", "properties": {"xs": ARRAY_BOMB}})],
            tool_choice="required",
        ),
        400,
        "tools[0].function.parameters.properties.xs.minItems",
    ),
    HostileCase(
        "tool-minItems-1e9-strict",
        CHAT,
        chat(tools=[tool({"type": "object", "properties": {"xs": ARRAY_BOMB}}, strict=True)]),
        400,
        "tools[0].function.parameters.properties.xs.minItems",
    ),
]

# Numbers that used to reach the engine and overflow there (500): now 400 by name.
_RANGES_CHAT = [
    *(("seed", v) for v in [*BIG, -(2**63) - 1]),
    *(("top_k", v) for v in [*BIG, -2]),
    ("n", 10**30),
    ("max_tokens", 2**64),
    ("max_completion_tokens", 2**64),
    ("min_tokens", 2**64),
    ("top_logprobs", 2**64),
    ("stop_token_ids", [2**64]),
    ("temperature", 1e30),
    ("top_p", 1e30),
    ("min_p", 1e30),
    ("frequency_penalty", 1e30),
    ("presence_penalty", -1e30),
    ("logit_bias", {"1": 1e30}),
]
_RANGES_COMPLETIONS = [
    ("seed", 2**64),
    ("top_k", 10**30),
    ("best_of", 2**64),
    ("logprobs", 2**64),
    ("max_tokens", 10**30),
    ("n", 2**64),
    ("prompt", [[2**64]]),
    ("prompt", [2**40]),
]
RANGES = [
    *(HostileCase(f"chat-{k}={v}"[:60], CHAT, chat(**{k: v}), 400, k) for k, v in _RANGES_CHAT),
    *(
        HostileCase(f"completions-{k}={v}"[:60], COMPLETIONS, completion(**{k: v}), 400, k)
        for k, v in _RANGES_COMPLETIONS
    ),
]

# Not JSON numbers, yet Python's json and pydantic took them.
NON_FINITE = [
    HostileCase(
        "temperature-NaN",
        CHAT,
        chat().replace('"max_tokens": 8', '"temperature": NaN'),
        400,
        "temperature",
    ),
    HostileCase(
        "repetition_penalty-Infinity",
        CHAT,
        chat().replace('"max_tokens": 8', '"repetition_penalty": Infinity'),
        400,
        "repetition_penalty",
    ),
    HostileCase(
        "frequency_penalty-1e400",
        COMPLETIONS,
        completion().replace('"max_tokens": 8', '"frequency_penalty": 1e400'),
        400,
        "frequency_penalty",
    ),
]

# Token ids the model does not have, and logit_bias keys that are no token id at all.
TOKEN_IDS = [
    HostileCase("logit_bias-key-huge", CHAT, chat(logit_bias={"9" * 40: 1}), 400, "logit_bias"),
    HostileCase("logit_bias-key-float", CHAT, chat(logit_bias={"1e30": 1}), 400, "logit_bias"),
    HostileCase(
        "logit_bias-key-unicode-digit", CHAT, chat(logit_bias={"\u00b2": 1}), 400, "logit_bias"
    ),
    HostileCase(
        "logit_bias-key-out-of-vocab", CHAT, chat(logit_bias={"100000": 1}), 400, "logit_bias"
    ),
    HostileCase("prompt-out-of-vocab", COMPLETIONS, completion(prompt=[100000]), 400, "prompt"),
    HostileCase("min_tokens-over-max_tokens", CHAT, chat(min_tokens=9), 400, "min_tokens"),
]

# Work: more than one request may ask of the engine.
WORK = [
    HostileCase("prompts-2000", COMPLETIONS, completion(prompt=["Hi"] * 2000), 400, "prompt"),
    HostileCase("token-lists-2000", COMPLETIONS, completion(prompt=[[1, 2]] * 2000), 400, "prompt"),
    HostileCase(
        "prompts-n-max_tokens",
        COMPLETIONS,
        completion(prompt=["Hi"] * 100, n=128, max_tokens=100),
        400,
        "prompt",
    ),
]

CASES = SCHEMA_BOMBS + RANGES + NON_FINITE + TOKEN_IDS + WORK
# Streamed or not, the same answer: a status before any event.
ALL_CASES = CASES + [case.streamed() for case in CASES]
