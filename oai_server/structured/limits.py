"""Bound what a JSON Schema may ask of the grammar compiler.

A schema is compiled into a grammar inside the engine process, and some keywords
cost memory in proportion to their value: `{"type": "array", "minItems": 1000000000}`
once made the whole server run out of memory. Every schema that is compiled
(`response_format` and `text.format`, a strict tool's parameters, the tools a
`tool_choice` of `required` or a name forces) is checked here first, and anything
beyond these bounds is a 400 naming the keyword, before the engine sees it. A tool's
schema that is only shown to the model (`tool_choice: auto`) is never compiled, so
only the body size bounds it: agents' tools say what they take in big numbers
(Claude Code's `Bash` has a string `maxLength` of 524288).

The bounds are far beyond what an answer can hold (a model writes a few thousand
tokens at most), so no useful schema meets them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, TypeGuard

from oai_server.errors import InvalidRequestError


@dataclass(frozen=True)
class SchemaLimits:
    """How much one schema may ask for."""

    # Levels of JSON objects and arrays in the schema document.
    max_depth: int = 64
    # Values in the schema document (objects, arrays, strings, numbers...).
    max_nodes: int = 20_000
    # Values once every `$ref` is replaced by what it points at (recursion counts once).
    max_expanded_nodes: int = 200_000
    # Distinct targets of `$ref`.
    max_ref_targets: int = 256
    # minItems, maxItems, minContains, maxContains.
    max_items: int = 4096
    # minLength, maxLength. A string's length is a counter, not a copy, in the grammar:
    # xgrammar compiled `maxLength` 16777216 for a 49k vocabulary in the time (~2 s) and
    # memory (no growth) that 65536 took.
    max_length: int = 2**24
    # minProperties, maxProperties.
    max_properties: int = 1024
    # A repeat count `{n}` / `{n,m}` in a `pattern`.
    max_repeat: int = 1000
    # minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (a signed int64).
    max_magnitude: int = 2**63 - 1


DEFAULT_LIMITS = SchemaLimits()

_ITEM_COUNTS = ("minItems", "maxItems", "minContains", "maxContains")
_LENGTHS = ("minLength", "maxLength")
_PROPERTY_COUNTS = ("minProperties", "maxProperties")
_RANGES = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
# Keywords whose values are data, not schemas: counted, never read as keywords.
_DATA = frozenset({"enum", "const", "default", "examples"})
_QUANTIFIER = re.compile(r"\{(\d+)(?:,(\d*))?\}")


class _Walk:
    """One pass over a schema document: node count, depth and keyword checks."""

    def __init__(self, limits: SchemaLimits, param: str) -> None:
        self.limits = limits
        self.param = param
        self.nodes = 0
        self.refs: list[str] = []

    def fail(self, path: str, message: str) -> InvalidRequestError:
        return InvalidRequestError(f"Invalid schema at '{path}': {message}", param=path)

    def run(self, root: Any) -> None:
        stack: list[tuple[Any, str, int, bool]] = [(root, self.param, 0, True)]
        while stack:
            node, path, depth, is_schema = stack.pop()
            self.nodes += 1
            if self.nodes > self.limits.max_nodes:
                raise self.fail(
                    self.param, f"the schema has more than {self.limits.max_nodes} values."
                )
            if isinstance(node, dict | list) and depth >= self.limits.max_depth:
                raise self.fail(
                    path, f"the schema nests more than {self.limits.max_depth} levels deep."
                )
            if isinstance(node, list):
                stack.extend((v, f"{path}[{i}]", depth + 1, is_schema) for i, v in enumerate(node))
            elif isinstance(node, dict):
                if is_schema:
                    self.keywords(node, path)
                for key, value in node.items():
                    schema = is_schema and key not in _DATA
                    stack.append((value, f"{path}.{key}", depth + 1, schema))

    def keywords(self, schema: dict[str, Any], path: str) -> None:
        limits = self.limits
        for names, bound in (
            (_ITEM_COUNTS, limits.max_items),
            (_LENGTHS, limits.max_length),
            (_PROPERTY_COUNTS, limits.max_properties),
        ):
            for name in names:
                value = schema.get(name)
                if _is_number(value) and not 0 <= value <= bound:
                    raise self.fail(
                        f"{path}.{name}", f"'{name}' is {value}; it must be 0 to {bound}."
                    )
        for name in _RANGES:
            value = schema.get(name)
            if _is_number(value) and not (
                math.isfinite(value) and abs(value) <= limits.max_magnitude
            ):
                raise self.fail(
                    f"{path}.{name}",
                    f"'{name}' is {value}; its magnitude must be at most {limits.max_magnitude}.",
                )
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            self.pattern(pattern, f"{path}.pattern")
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            for key in patterns:
                self.pattern(key, f"{path}.patternProperties")
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#"):
                raise self.fail(
                    f"{path}.$ref",
                    f"'$ref' is '{ref[:100]}'; only references within the schema (#/...) "
                    "are supported.",
                )
            self.refs.append(ref)

    def pattern(self, pattern: str, path: str) -> None:
        for match in _QUANTIFIER.finditer(pattern):
            for digits in match.groups():
                if digits and (len(digits) > 9 or int(digits) > self.limits.max_repeat):
                    raise self.fail(
                        path,
                        f"the pattern repeats {match.group(0)[:20]} times; "
                        f"at most {self.limits.max_repeat} is allowed.",
                    )


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _resolve(root: Any, ref: str) -> Any:
    """The value a local JSON-pointer `$ref` points at, or None."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None  # an anchor: the compiler resolves it, nothing to expand here
    node = root
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


class _Expansion:
    """The size of a schema with every `$ref` replaced, capped just past the limit."""

    def __init__(self, root: Any, limits: SchemaLimits, param: str) -> None:
        self.root = root
        self.limits = limits
        self.param = param
        self.local: dict[str, tuple[int, Counter[str]]] = {}
        self.done: dict[str, int] = {}

    def scan(self, ref: str) -> tuple[int, Counter[str]]:
        found = self.local.get(ref)
        if found is None:
            if len(self.local) >= self.limits.max_ref_targets:
                raise InvalidRequestError(
                    f"Invalid schema at '{self.param}': '$ref' points at more than "
                    f"{self.limits.max_ref_targets} different places.",
                    param=self.param,
                )
            walk = _Walk(SchemaLimits(), self.param)
            walk.run(_resolve(self.root, ref))
            found = self.local[ref] = (walk.nodes, Counter(walk.refs))
        return found

    def size(self, ref: str, visiting: set[str]) -> int:
        if ref in self.done:
            return self.done[ref]
        if ref in visiting or _resolve(self.root, ref) is None:
            return 1  # recursion, or an anchor: one rule, not a copy
        cap = self.limits.max_expanded_nodes + 1
        nodes, refs = self.scan(ref)
        visiting.add(ref)
        total = nodes
        for target, count in refs.items():
            total = min(cap, total + count * self.size(target, visiting))
        visiting.discard(ref)
        self.done[ref] = total
        return total


def check_schema(schema: Any, param: str, limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Raise a 400 naming the keyword if `schema` asks more of the compiler than `limits`."""
    walk = _Walk(limits, param)
    walk.run(schema)
    if not walk.refs:
        return
    for ref in walk.refs:
        if ref.startswith("#/") and _resolve(schema, ref) is None:
            raise InvalidRequestError(
                f"Invalid schema at '{param}': '$ref' '{ref[:100]}' points at nothing.",
                param=param,
            )
    if _Expansion(schema, limits, param).size("#", set()) > limits.max_expanded_nodes:
        raise InvalidRequestError(
            f"Invalid schema at '{param}': with every '$ref' expanded it has more than "
            f"{limits.max_expanded_nodes} values.",
            param=param,
        )
