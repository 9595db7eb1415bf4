"""The README stays true: it documents every setting and the commands that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented(name: str) -> None:
    assert f"`--{name.replace('_', '-')}`" in README


def test_the_two_commands_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run", "test"):
        assert f"make {target}" in README
        assert f"\n{target}:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_no_placeholders_left() -> None:
    assert "PLACEHOLDER" not in README
    assert "TODO" not in README
