"""The shape the code keeps, read from its imports: features wired one way, never through
another feature's routes; the command line imported by nothing."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import oai_server

PACKAGE = Path(oai_server.__file__).parent
FEATURES = ("store", "cache", "responses", "realtime", "auth", "limits", "web", "embeddings")


def _imports(path: Path) -> set[str]:
    """Every `oai_server...` module `path` imports, names imported from a module included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {name for name in found if name.startswith("oai_server")}


def _package_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def test_no_module_imports_another_features_routes() -> None:
    crossing = [
        (str(path.relative_to(PACKAGE)), name)
        for path in PACKAGE.rglob("*.py")
        for name in _imports(path)
        if name.count(".") >= 1
        and name.split(".")[1] in FEATURES
        and name.split(".")[1] != _package_of(path)
        and ("routes" in name.split(".")[2:] or name.endswith(".router"))
    ]
    assert crossing == []


def test_nothing_imports_the_command_line() -> None:
    importers = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__main__.py" and "oai_server.__main__" in _imports(path)
    ]
    assert importers == []


def test_every_feature_package_is_wired_by_one_function() -> None:
    for name in FEATURES:
        wire = importlib.import_module(f"oai_server.{name}").feature
        assert inspect.signature(wire).return_annotation.startswith("Feature["), name
        assert list(inspect.signature(wire).parameters) == ["state"], name
