"""The docs stay true and build: every setting on the generated page, every link resolving,
and the README a front door that names the commands that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oai_server.settings import Settings
from tests.docs.settings_page import SETTINGS_PAGE, settings_page

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# The front door: what it is, the two commands, calling it, a tour, the figures.
README_MAX_LINES = 200


def test_settings_page_is_generated_from_settings() -> None:
    assert SETTINGS_PAGE.read_text() == settings_page(), (
        "docs/settings.md is out of date: run `make docs-settings`"
    )


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented(name: str) -> None:
    assert f"`--{name.replace('_', '-')}`" in SETTINGS_PAGE.read_text()


def test_docs_build_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link, a page left out of the nav or a missing page
    fails. Offline: the theme's fonts are off and no plugin fetches anything."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is not installed (the dev extra)"
    built = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "site" / "settings" / "index.html").is_file()
    assert "fonts.googleapis.com" not in (tmp_path / "site" / "index.html").read_text()


def test_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= README_MAX_LINES
    for page in ("docs/settings.md", "docs/performance.md", "docs/architecture.md"):
        assert page in README


def test_readme_links_resolve() -> None:
    """The README is read on the forge, outside MkDocs: its relative links are checked here."""
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), f"README links to {target}, which is not there"


def test_the_two_commands_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run", "test", "docs", "docs-settings"):
        assert f"\n{target}:" in makefile
    for target in ("run", "test"):
        assert f"make {target}" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_no_placeholders_left() -> None:
    for path in (ROOT / "README.md", *(ROOT / "docs").rglob("*.md")):
        text = path.read_text()
        assert "PLACEHOLDER" not in text, path
        assert "TODO" not in text, path


def test_every_package_is_named_in_the_architecture_page() -> None:
    """The layout and the layers of docs/architecture.md name every package of oai_server/
    (and its modules beside them), so the map keeps up with the code."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    layout = page.split("## The layout", 1)[1].split("## The layers", 1)[0]
    layers = page.split("## The layers", 1)[1].split("Data flows", 1)[0]
    package = ROOT / "oai_server"
    parts = [
        f"{path.name}/"
        for path in sorted(package.iterdir())
        if path.is_dir() and (path / "__init__.py").exists()
    ]
    assert len(parts) > 20
    for part in parts:
        assert re.search(rf"(?m)^  {re.escape(part)}|\s{re.escape(part)}\s", layout), part
        assert f"`{part}`" in layers, part
