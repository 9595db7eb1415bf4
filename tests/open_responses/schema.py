"""The Open Responses specification as JSON Schema: load once, validate a document.

The vendored ``openapi.json`` (see ``README.md`` here) is OpenAPI 3.1, whose schemas are
JSON Schema 2020-12 already; the OpenAPI-only keywords it uses (``discriminator``,
``example``, ``x-*``) are annotations that :mod:`jsonschema` ignores, so no rewriting is
needed, unlike OpenAI's own spec (``tests/conformance/schemas.py``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH: Final = Path(__file__).resolve().parent / "openapi.json"
"""The vendored Open Responses OpenAPI document."""

SPEC_COMMIT: Final = "1e33c10fb3c19480751658eae966dad8e9c91514"
"""The upstream commit the document (and the ported checks) are pinned to."""

# The URI the document is registered under; never fetched.
_SPEC_URI: Final = "urn:open-responses"
_MAX_SHOWN: Final = 300


class OpenResponsesError(AssertionError):
    """A document does not conform to the Open Responses specification."""


@functools.cache
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return spec


def components() -> frozenset[str]:
    """The names of the specification's ``#/components/schemas``."""
    return frozenset(_spec()["components"]["schemas"])


@functools.cache
def _validator(component: str) -> Draft202012Validator:
    if component not in components():
        raise KeyError(f"no component {component!r} in the Open Responses spec")
    registry: Registry[Any] = Registry().with_resource(
        _SPEC_URI, Resource.from_contents(_spec(), default_specification=DRAFT202012)
    )
    schema = {"$ref": f"{_SPEC_URI}#/components/schemas/{component}"}
    return Draft202012Validator(schema, registry=registry)


def _describe(error: ValidationError) -> str:
    where = "".join(f"[{part!r}]" for part in error.absolute_path) or "(root)"
    # A oneOf/anyOf failure is clearest through the branch that came closest.
    best = max(error.context or [], key=lambda e: len(e.absolute_path), default=None)
    detail = f" (closest branch: {best.message[:_MAX_SHOWN]})" if best is not None else ""
    return f"{where}: {error.message[:_MAX_SHOWN]}{detail}"


def errors(obj: object, component: str) -> list[str]:
    """Every way ``obj`` fails ``#/components/schemas/<component>``; empty when it conforms."""
    found = sorted(_validator(component).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [_describe(error) for error in found]


def validate(obj: object, component: str) -> None:
    """Assert that ``obj`` conforms to ``#/components/schemas/<component>``."""
    problems = errors(obj, component)
    if problems:
        listed = "\n  ".join(problems)
        raise OpenResponsesError(f"not a valid Open Responses {component}:\n  {listed}")
