"""OpenAI's spec as JSON Schema: loading, rewriting its OpenAPI quirks, validating."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH: Final = Path(__file__).resolve().parents[1] / "spec" / "openapi.yaml"
"""The vendored OpenAI OpenAPI document."""

COMPLETION_STREAM_SCHEMA: Final = "CreateCompletionStreamResponse"
"""Synthetic schema (not in the spec) for the SSE chunks of ``/v1/completions``."""

RESPONSE_STREAM_SCHEMA: Final = "ResponseStreamEvent"
"""The spec's schema of each event of a streamed ``/v1/responses`` call; such a stream
ends with its last event (``response.completed`` ...), not with ``data: [DONE]``."""

# Base URI under which the rewritten components are registered; never fetched.
_SPEC_URI: Final = "urn:openai-openapi"

# Keywords whose value is a schema, a list of schemas, or a map of schemas.
_SCHEMA_KEYWORDS: Final = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_LIST_KEYWORDS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP_KEYWORDS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
# OpenAPI-only keywords, dropped (``x-*`` extensions are dropped too).
_OPENAPI_KEYWORDS: Final = frozenset(
    {"nullable", "discriminator", "example", "xml", "externalDocs"}
)
_COMBINATORS: Final = frozenset({"allOf", "anyOf", "oneOf", "not", "$ref"})
# Keywords that constrain nothing: a schema of only these accepts anything.
_ANNOTATION_KEYWORDS: Final = frozenset(
    {
        "title",
        "description",
        "default",
        "deprecated",
        "examples",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)

_MAX_SHOWN: Final = 300  # characters of a document quoted in a message


class ConformanceError(AssertionError):
    """A response does not conform to the OpenAI specification."""


# --------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------


def to_json_schema(node: Any) -> Any:
    """Rewrite one OpenAPI schema object into equivalent JSON Schema 2020-12.

    ``nullable: true`` becomes ``{"anyOf": [<schema>, {"type": "null"}]}``,
    which also covers ``enum`` lists (null need not be listed) and ``$ref``
    siblings; OpenAPI-only keywords and ``x-*`` extensions are dropped; a
    schema with ``properties`` but no ``type`` (nor combinator) gets
    ``type: object``, as OpenAI's SDKs read it, so that it rejects non-objects.
    Property *names* are never mistaken for keywords: only keyword positions
    that hold schemas are descended into.
    """
    if not isinstance(node, dict):
        return node  # boolean schema
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _OPENAPI_KEYWORDS or key.startswith("x-"):
            continue
        if key in _SCHEMA_KEYWORDS:
            out[key] = to_json_schema(value)
        elif key in _SCHEMA_LIST_KEYWORDS:
            out[key] = [to_json_schema(item) for item in value]
        elif key in _SCHEMA_MAP_KEYWORDS:
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        else:
            out[key] = value
    if "properties" in out and "type" not in out and not _COMBINATORS & set(out):
        out["type"] = "object"  # e.g. Model: an object in every OpenAI SDK, untyped here
    if node.get("nullable") is True and not set(out) <= _ANNOTATION_KEYWORDS:
        annotations = {key: out.pop(key) for key in list(out) if key in _ANNOTATION_KEYWORDS}
        return {**annotations, "anyOf": [out, {"type": "null"}]}
    return out


def _completion_stream_schema(response_schema: dict[str, Any]) -> dict[str, Any]:
    """Derive :data:`COMPLETION_STREAM_SCHEMA`: ``finish_reason`` and ``usage`` may be null."""
    schema = copy.deepcopy(response_schema)
    properties = schema["properties"]
    choice = properties["choices"]["items"]["properties"]
    choice["finish_reason"] = {"anyOf": [choice["finish_reason"], {"type": "null"}]}
    properties["usage"] = {"anyOf": [properties["usage"], {"type": "null"}]}
    schema["description"] = (
        "Not in the spec: CreateCompletionResponse with a nullable choices[].finish_reason "
        "(null in every streamed chunk but the last) and a nullable usage (null in every "
        "chunk but the usage chunk when stream_options.include_usage is set)."
    )
    return schema


def _parse_spec() -> dict[str, Any]:
    """Parse the YAML spec and rewrite its schemas (about a second with libyaml)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with SPEC_PATH.open("rb") as fh:
        spec = yaml.load(fh, Loader=loader)
    schemas = {
        name: to_json_schema(schema) for name, schema in spec["components"]["schemas"].items()
    }
    _allow_unscored_echo_token(schemas["CreateCompletionResponse"])
    _allow_request_roles(schemas)
    _allow_streamed_custom_tool_calls(schemas["ChatCompletionMessageToolCallChunk"])
    schemas.setdefault(
        COMPLETION_STREAM_SCHEMA, _completion_stream_schema(schemas["CreateCompletionResponse"])
    )
    return schemas


def _allow_unscored_echo_token(response_schema: dict[str, Any]) -> None:
    """Erratum: with `echo` and `logprobs`, the prompt's first token has no logprob.

    Nothing precedes it, so OpenAI's API (and vLLM's) send `null` at index 0 of
    `token_logprobs` and `top_logprobs`, which the spec types as plain numbers and
    objects. Evaluation harnesses index these arrays by position, so the null must
    stay; only those two item types are widened.
    """
    choice = response_schema["properties"]["choices"]["items"]["properties"]
    logprobs = choice["logprobs"]["anyOf"][0]["properties"]
    for name in ("token_logprobs", "top_logprobs"):
        items = logprobs[name]["items"]
        logprobs[name]["items"] = {"anyOf": [items, {"type": "null"}]}


def _allow_request_roles(schemas: dict[str, Any]) -> None:
    """Erratum: a stored completion's messages are its request's, with their own roles.

    `ChatCompletionMessageList` types each message as an assistant message, but the
    spec's own example of `GET /chat/completions/{id}/messages` lists `"role": "user"`,
    and so does OpenAI's API: only the role's enum is widened to the request roles.
    """
    message = copy.deepcopy(schemas["ChatCompletionResponseMessage"])
    message["properties"]["role"] = {
        "type": "string",
        "enum": ["system", "developer", "user", "assistant", "tool", "function"],
    }
    items = schemas["ChatCompletionMessageList"]["properties"]["data"]["items"]
    items["allOf"] = [message, *items["allOf"][1:]]


def _allow_streamed_custom_tool_calls(chunk_schema: dict[str, Any]) -> None:
    """Erratum: a streamed custom tool call is `type: "custom"` with `custom: {name, input}`.

    The whole message's tool calls may be custom (`ChatCompletionMessageCustomToolCall`),
    but the chunk's `type` lists `function` only and it has no `custom`: the spec's own
    gap (openai/openai-openapi#576; OpenAI streams them so, and its SDKs read them as
    such). The enum is widened and `custom` added, in the message's shape made partial.
    """
    properties = chunk_schema["properties"]
    properties["type"] = {**properties["type"], "enum": ["function", "custom"]}
    properties["custom"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "input": {"type": "string"}},
    }


def _cache_file() -> Path:
    """Where the rewritten schemas are kept between runs, keyed by content.

    The key hashes both the spec and this module, so editing either one
    invalidates the cache; the directory is the user's own cache directory.
    """
    digest = hashlib.sha256(SPEC_PATH.read_bytes() + Path(__file__).read_bytes()).hexdigest()
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "oai-server-tests" / f"openapi-schemas-{digest[:32]}.json"


@functools.cache
def load_schemas() -> dict[str, Any]:
    """Return every ``#/components/schemas`` entry, rewritten to JSON Schema.

    Once per process: from a JSON cache written by an earlier run (a few
    tens of milliseconds), else by parsing the 3 MB YAML spec (about a second)
    and writing that cache.  A cache that cannot be read or written is skipped.
    """
    cache = _cache_file()
    try:
        cached: dict[str, Any] = json.loads(cache.read_bytes())
    except (OSError, ValueError):
        pass
    else:
        return cached
    schemas = _parse_spec()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(schemas), encoding="utf-8")
        os.replace(partial, cache)  # atomic: concurrent runs never see half a file
    except (OSError, TypeError, ValueError):
        pass
    return schemas


@functools.cache
def _registry() -> Registry[Any]:
    document = {"components": {"schemas": load_schemas()}}
    resource: Resource[Any] = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(_SPEC_URI, resource)
    return registry


@functools.cache
def _validator(schema_name: str) -> Draft202012Validator:
    if schema_name not in load_schemas():
        raise KeyError(f"no schema {schema_name!r} in #/components/schemas of {SPEC_PATH.name}")
    return Draft202012Validator(
        {"$ref": f"{_SPEC_URI}#/components/schemas/{schema_name}"}, registry=_registry()
    )


def _json_path(path: Iterable[str | int]) -> str:
    """Render a jsonschema error path as ``$.choices[0].message``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _shorten(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(error: ValidationError, depth: int = 0) -> list[str]:
    """One line per error, then the failing branches of ``anyOf``/``oneOf``.

    The ``{"type": "null"}`` branches added for ``nullable`` are left out as
    noise: they only say that the value is not null.
    """
    lines = [f"{_json_path(error.absolute_path)}: {_shorten(error.message)}"]
    if not error.context or depth >= 2:
        return lines
    branches = [
        e for e in error.context if not (e.validator == "type" and e.validator_value == "null")
    ]
    for sub in sorted(
        branches or error.context, key=lambda e: (str(e.relative_schema_path), e.message)
    )[:8]:
        branch = (
            f"{error.validator}[{sub.relative_schema_path[0]}]" if sub.relative_schema_path else "?"
        )
        first, *rest = _describe(sub, depth + 1)
        lines.append(f"{'    ' * depth}  - {branch}: {first}")
        lines.extend(rest)
    return lines


def check(schema_name: str, instance: object) -> list[str]:
    """Return readable reasons why ``instance`` does not conform (empty if it does).

    ``schema_name`` names an entry of ``#/components/schemas`` (or
    :data:`COMPLETION_STREAM_SCHEMA`); each reason is ``<json path>: <why>``.
    """
    errors = sorted(
        _validator(schema_name).iter_errors(instance), key=lambda e: _json_path(e.absolute_path)
    )
    return [line for error in errors for line in _describe(error)]


def validate(schema_name: str, instance: object) -> None:
    """Assert that ``instance`` conforms to ``#/components/schemas/<schema_name>``.

    Raises :class:`ConformanceError` (an :class:`AssertionError`) listing each
    violation as ``<json path>: <reason>``.
    """
    problem = _nonconformance(schema_name, instance)
    if problem is not None:
        raise ConformanceError(problem)


def _nonconformance(schema_name: str, instance: object) -> str | None:
    """The message :func:`validate` raises, or ``None`` if ``instance`` conforms."""
    reasons = check(schema_name, instance)
    if not reasons:
        return None
    shown = _shorten(json.dumps(instance, default=repr), 1000)
    return (
        f"does not conform to #/components/schemas/{schema_name}:\n  "
        + "\n  ".join(reasons)
        + f"\n  document: {shown}"
    )
