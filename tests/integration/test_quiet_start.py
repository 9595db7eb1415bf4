"""The first minutes stay quiet: a start shows our lines, not vLLM's Triton notice.

vLLM's CPU build logs "Triton is installed, but doesn't include CPU backend. Disabling
Triton." in each process that imports it; the engine's processes are spawned, where our
logging is not configured (`oai_server.vllm_notices`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import Server

ROOT = Path(__file__).resolve().parents[2]

# A package run with -m, as `python -m oai_server` is, whose spawned child imports vLLM.
PROBE_MAIN = """\
import importlib
import multiprocessing
import sys

from oai_server.vllm_notices import import_first_in_spawned_processes

if __name__ == "__main__":
    if sys.argv[1] == "quiet":
        import_first_in_spawned_processes()
    child = multiprocessing.get_context("spawn").Process(
        target=importlib.import_module, args=("vllm.triton_utils.importing",)
    )
    child.start()
    child.join()
    sys.exit(child.exitcode)
"""


def _spawn_probe(tmp_path: Path, mode: str) -> str:
    package = tmp_path / "probe"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(PROBE_MAIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "probe", mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stderr


def test_spawned_process_drops_the_notice(tmp_path: Path) -> None:
    # Without the fix the spawned child prints it: the probe can see what it looks for.
    assert "Triton is installed" in _spawn_probe(tmp_path, "loud")
    assert "Triton" not in _spawn_probe(tmp_path, "quiet")


def test_server_start_shows_no_triton_notice(server: Server) -> None:
    """The session's server (a chat and an embedding engine) started without it."""
    log = server.log.read_text()
    assert "ready in" in log
    assert "Triton" not in log, log[-4000:]
