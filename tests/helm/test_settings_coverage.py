"""Every setting of the server can be set from the chart's values, and reaches the server.

A value for each field of `Settings` is rendered under `server:` (and, separately, read from
a Secret through `secretSettings`); the environment variable the chart writes is then read
back by `Settings` itself, which must see the value the values asked for. A new setting
needs no template edit; only `python -m tests.helm.settings_schema` to describe it in
values.schema.json (the schema test below says so when it is missing).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import helm_python
import pytest

from oai_server.engine.settings import NAME_EQUALS_PATH
from oai_server.settings import Settings
from tests.helm.chart import env, render
from tests.helm.settings_schema import camel_case, read_values_schema, server_properties

FIELDS = sorted(Settings.model_fields)
# Settings whose paths must hold more than a directory: a hub id instead (checked later).
HUB_IDS = {"model": ["org/chat-model"], "embedding_model": "org/embedding-model"}
# Settings whose keys must be vLLM's engine arguments' names.
NAMED: dict[str, Any] = {
    "vllm_args": {"block_size": 32},
    # A parser's name from vLLM's registry, and a file that registers parsers.
    "tool_call_parser": "llama3_json",
    "reasoning_parser": "deepseek_r1",
    "tool_parser_plugin": str(
        Path(str(importlib.util.find_spec("vllm").origin)).parent
        / "tool_parsers"
        / "hermes_tool_parser.py"
    ),
}


def sample(schema: dict[str, Any]) -> Any:
    """A valid value for a property of values.schema.json, unlike the usual defaults."""
    if "enum" in schema:
        return schema["enum"][-1]
    if "const" in schema:
        return schema["const"]
    if "anyOf" in schema:
        return sample(schema["anyOf"][0])
    if schema.get("pattern") == NAME_EQUALS_PATH:
        return "sample=/"
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        return max(low, 4194304)  # large enough to catch YAML's float64 exponent form
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0.0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 1.0))
        return (low + high) / 2 if high > low else low
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}))]
    if kind == "object":
        return {"k": sample(schema.get("additionalProperties") or {"type": "string"})}
    # Strings and paths: a directory that exists, which a setting naming one may require
    # (repeated to a string's least length: "////" is still the root).
    return "/" * schema.get("minLength", 1)


def settings_from_env(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> Settings:
    """What the server reads from exactly these OAI_* variables."""
    for name in [name for name in os.environ if name.startswith("OAI_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_values_schema_describes_every_setting() -> None:
    generated = server_properties()
    committed = read_values_schema()["properties"]["server"]["properties"]
    assert committed == generated, (
        "values.schema.json is out of date with oai_server/settings.py: "
        "run `python -m tests.helm.settings_schema`"
    )


@pytest.mark.parametrize("field", FIELDS)
def test_setting_reaches_server_from_values(
    chart: helm_python.Chart, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    key = camel_case(field)
    value = HUB_IDS.get(field) or NAMED.get(field) or sample(server_properties()[key])
    variables = env(render(chart, {"server": {key: value}}))
    name = f"OAI_{field.upper()}"
    assert name in variables, f"server.{key} did not become {name}"
    plain = {n: e["value"] for n, e in variables.items() if n.startswith("OAI_") and "value" in e}
    seen = getattr(settings_from_env(monkeypatch, plain), field)
    assert seen == getattr(Settings.model_validate({field: value}), field), (
        f"server.{key}: {json.dumps(value)} reached the server as {seen!r}"
    )


@pytest.mark.parametrize("field", FIELDS)
def test_setting_read_from_secret(chart: helm_python.Chart, field: str) -> None:
    key = camel_case(field)
    ref = {"name": "oai-secrets", "key": field}
    variables = env(render(chart, {"secretSettings": {key: ref}}))
    assert variables[f"OAI_{field.upper()}"]["valueFrom"] == {"secretKeyRef": ref}
