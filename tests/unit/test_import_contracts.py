"""The shape the code keeps, read from its imports: the import contracts in pyproject.toml
(layers from the entry points down to the schemas, the core's state naming no feature, no
feature reaching another's routes or middleware, Anthropic's shapes kept to its feature, no
circle, benchmarks apart from tests) hold, and every package is under them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import oai_server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(oai_server.__file__).parent


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_the_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    # The code under test is this checkout's, whatever the environment has installed.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _parts() -> set[str]:
    """Every package and module right under `oai_server`."""
    return {
        f"oai_server.{path.name.removesuffix('.py')}"
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }


def test_every_package_and_module_of_the_server_is_in_a_layer() -> None:
    (layers,) = [c["layers"] for c in _contracts() if c.get("id") == "layers"]
    assert isinstance(layers, list)
    named = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    assert _parts() - named == set()


def test_only_the_anthropic_feature_and_the_wiring_import_anthropics_schemas() -> None:
    """The core and `batch` learn Anthropic's error envelope, model list and batch endpoint
    from the feature's hooks; a new package is under the rule unless named here."""
    (apart,) = [c for c in _contracts() if c.get("id") == "anthropic-apart"]
    assert apart["type"] == "forbidden"
    assert "schemas.anthropic" in apart["forbidden_modules"]  # type: ignore[operator]
    allowed = {"anthropic", "app", "assembly", "ray_serve", "cli", "__main__"}
    sources = apart["source_modules"]
    assert isinstance(sources, list)
    assert set(sources) == _parts() - {f"oai_server.{name}" for name in allowed}
    assert "oai_server.batch" in sources


def test_every_feature_is_kept_from_the_others_routes_and_middleware() -> None:
    (edges,) = [c for c in _contracts() if c.get("id") == "feature-edges"]
    (state,) = [c for c in _contracts() if c.get("id") == "core-state"]
    sources = edges["source_modules"]
    assert isinstance(sources, list)
    features = {
        path.parent.name for path in PACKAGE.glob("*/*.py") if "def feature(" in path.read_text()
    }
    assert features >= {"batch", "lora", "store", "cache", "responses", "embeddings", "web"}
    assert {f"oai_server.{name}" for name in features} - set(sources) == set()
    forbidden = state["forbidden_modules"]
    assert isinstance(forbidden, list)
    assert {f"oai_server.{name}" for name in features} - set(forbidden) == set()
