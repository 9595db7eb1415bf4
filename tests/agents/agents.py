"""The coding agents the suite drives: Codex CLI and Claude Code, run as a user runs them.

They come from npm (`tests/agents/package.json`, pinned in its lock file; `make test` runs
`npm ci` here). Each run is a subprocess in a working directory of the test's, with a home
of its own (the agent's settings, sessions and credentials), so runs neither see the user's
nor each other's. Only 127.0.0.1 is reachable: every proxy variable points at a port nobody
listens on, so an agent that tried to reach anything else (an update check, telemetry, a
download) would fail at once, not hang or fetch.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BIN = Path(__file__).parent / "node_modules" / ".bin"
# One turn of an agent on the embedded model takes seconds to a minute on a loaded
# 2-core machine; three minutes means something is wrong.
TURN_TIMEOUT_S = 180
# The discard port: nothing listens on it, so a connection through this "proxy" fails at once.
NO_NETWORK = "http://127.0.0.1:9"
API_KEY = "sk-agents"


@dataclass(frozen=True)
class Turn:
    """One run of an agent: what it printed, and how long it took."""

    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Agent:
    """An agent's command line and environment, run in `workdir`."""

    command: tuple[str, ...]
    env: dict[str, str]
    workdir: Path

    def run(self, *args: str) -> Turn:
        """Run the agent with `args`; it must exit 0."""
        started = time.monotonic()
        done = subprocess.run(
            [*self.command, *args],
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TURN_TIMEOUT_S,
            check=False,
        )
        turn = Turn(done.stdout, done.stderr, time.monotonic() - started)
        assert done.returncode == 0, (
            f"{self.command[0]} {' '.join(args)} exited {done.returncode}:\n"
            f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
        )
        return turn


def _binary(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: run `make test` (or `npm ci` in tests/agents)"
    return str(path)


def _environment(home: Path) -> dict[str, str]:
    proxies = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **dict.fromkeys(proxies, NO_NETWORK),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def codex(root: str, model: str, home: Path, workdir: Path, *, websockets: bool = False) -> Agent:
    """Codex CLI with the server as its model provider (the Responses API), as its docs
    configure a self-hosted one: `$CODEX_HOME/config.toml`, the key in an environment variable;
    with `websockets`, the provider's `supports_websockets` (Responses WebSocket mode)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "oai-server"\n'
        "[model_providers.oai-server]\n"
        'name = "oai-server"\n'
        f'base_url = "{root}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "OAI_SERVER_API_KEY"\n' + ("supports_websockets = true\n" if websockets else "")
    )
    env = _environment(home) | {"CODEX_HOME": str(codex_home), "OAI_SERVER_API_KEY": API_KEY}
    return Agent((_binary("codex"),), env, workdir)


def claude_code(root: str, model: str, home: Path, workdir: Path) -> Agent:
    """Claude Code with the server as its Anthropic endpoint, every model role on `model`,
    and its nonessential traffic (telemetry, update checks) off."""
    env = _environment(home) | {
        "ANTHROPIC_BASE_URL": root,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return Agent((_binary("claude"),), env, workdir)
