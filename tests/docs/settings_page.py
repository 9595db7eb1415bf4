"""The docs' settings page, generated from the server's one definition of its settings.

`docs/settings.md` lists every field of `Settings` as its flag, its environment variable,
its Helm value and its default, with the field's own description, as the chart's values
schema is generated from the same class (`tests/helm/settings_schema.py`). A test checks
that the committed page is what this module writes; after adding a setting::

    make docs-settings        # PYTHONPATH=. python -m tests.docs.settings_page
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from oai_server.engine.settings import EngineOptions
from oai_server.settings import Settings
from tests.helm.settings_schema import camel_case

SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"

_HEADER = """\
# Settings

<!-- Generated from oai_server.settings.Settings by `make docs-settings`; do not edit. -->

Every setting is a flag, an environment variable `OAI_<NAME>` and a Helm value under
`server:` (by its camelCase name); engine settings keep vLLM's names. `oai-server --help`
prints them all, and the chart's `values.schema.json` is generated from the same class.
A [models file](models/index.md) takes the engine settings again, per model, by their
snake_case names.
"""

_SECTIONS = (
    ("The server", "HTTP, models, features, Ray Serve and production.", False),
    (
        "The engine",
        "How each model's vLLM engine runs (`--model` given several times: every engine).",
        True,
    ),
)


def _default(field: FieldInfo) -> str:
    """The default as a user reads it: none for unset, a home directory as `~`."""
    if field.default_factory is not None:
        return "none"
    value: Any = field.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Path):
        home = str(Path.home())
        text = str(value)
        return "`~" + text[len(home) :] + "`" if text.startswith(home) else f"`{text}`"
    return f"`{value}`"


def _choices(field: FieldInfo) -> str:
    """` (one of a, b)` for a field whose type is a set of literal values."""
    if get_origin(field.annotation) is not Literal:
        return ""
    return " One of: " + ", ".join(f"`{choice}`" for choice in get_args(field.annotation)) + "."


def _row(name: str, field: FieldInfo) -> str:
    flag = "--" + name.replace("_", "-")
    description = (field.description or "").replace("|", "\\|") + _choices(field)
    return (
        f"| `{flag}` | `OAI_{name.upper()}` | `{camel_case(name)}` | {_default(field)} "
        f"| {description} |"
    )


def settings_page() -> str:
    """The whole page, as committed."""
    parts = [_HEADER]
    for title, intro, engine in _SECTIONS:
        parts.append(f"\n## {title}\n\n{intro}\n\n")
        parts.append("| flag | environment | Helm `server.` | default | what it does |\n")
        parts.append("|---|---|---|---|---|\n")
        for name, field in Settings.model_fields.items():
            if (name in EngineOptions.model_fields) == engine:
                parts.append(_row(name, field) + "\n")
    return "".join(parts)


def main() -> None:
    """Rewrite docs/settings.md from `Settings`."""
    SETTINGS_PAGE.write_text(settings_page())


if __name__ == "__main__":
    main()
