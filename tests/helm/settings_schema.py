"""The chart's `server` values, generated from the server's one definition of its settings.

`values.schema.json` describes `server` with one property per field of `Settings`, by its
camelCase name, so `helm install` rejects a misspelt or mistyped setting; and `models`
(the server's --models-file) as a list of `ModelEntry`, by their snake_case names, as the
file has them. Regenerate it after adding a setting (the chart's templates need no edit)::

    python -m tests.helm.settings_schema

(and after a vLLM upgrade: a models-file entry lists vLLM's engine arguments by name).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oai_server.models.entries import ModelEntry
from oai_server.settings import Settings

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "oai-server"
VALUES_SCHEMA = CHART_DIR / "values.schema.json"

# Annotations that say nothing about validity, or that name this machine (a default under
# the home directory): left out of the chart's schema.
_DROPPED = frozenset({"title", "default", "format", "examples"})


def camel_case(field_name: str) -> str:
    """`max_model_len` -> `maxModelLen`: the name of a setting under `server:`."""
    first, *rest = field_name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _clean(node: Any, defs: dict[str, Any]) -> Any:
    """`node` with references inlined, `null` alternatives and annotations left out."""
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _clean(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or key == "$defs":
            continue
        cleaned[key] = _clean(value, defs)
    # Helm drops a null value before it validates, so `X | None` is just X in values.
    alternatives = [alt for alt in cleaned.pop("anyOf", []) if alt != {"type": "null"}]
    if len(alternatives) == 1:
        cleaned.update(alternatives[0])
    elif alternatives:
        cleaned["anyOf"] = alternatives
    return cleaned


def server_properties() -> dict[str, Any]:
    """One JSON-schema property per setting, keyed by its camelCase name."""
    schema = Settings.model_json_schema()
    defs = schema.get("$defs", {})
    return {camel_case(name): _clean(prop, defs) for name, prop in schema["properties"].items()}


def models_schema() -> dict[str, Any]:
    """The chart's `models`: a list of models-file entries, unknown keys refused."""
    schema = ModelEntry.model_json_schema()
    item = _clean({k: v for k, v in schema.items() if k != "$defs"}, schema.get("$defs", {}))
    item.pop("description", None)
    # A models file takes any of vLLM's engine arguments by name, beside ours: listed by
    # name (vLLM's parser checks their values), so a misspelt key still fails at install.
    from oai_server.engine.vllm.flags import engine_names

    for name in sorted(engine_names() - set(item["properties"])):
        flag = "--" + name.replace("_", "-")
        item["properties"][name] = {"description": f"vLLM's engine argument {flag}"}
    return {
        "description": "Every model to serve (the server's --models-file).",
        "type": "array",
        "items": item,
    }


def read_values_schema() -> dict[str, Any]:
    """The chart's values.schema.json as committed."""
    loaded: dict[str, Any] = json.loads(VALUES_SCHEMA.read_text())
    return loaded


def main() -> None:
    """Rewrite `server` in the chart's values.schema.json from `Settings`."""
    schema = read_values_schema()
    schema["properties"]["server"]["properties"] = server_properties()
    schema["properties"]["models"] = models_schema()
    VALUES_SCHEMA.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
