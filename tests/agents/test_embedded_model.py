"""Codex CLI and Claude Code, unchanged, hold two turns with the embedded model.

Both run against one real server (`python -m oai_server`) started once for the module, with
the context agents need: Claude Code's whole first prompt is ~12,500 tokens, beyond
SmolLM2's own 8,192, so the context is raised to 32,768 as `vllm serve` allows it
(`VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`). The model's generation config is overridden as
`vllm serve --override-generation-config` does it: `max_new_tokens` bounds every answer
whatever the agent asks for (Claude Code asks for 32,000 tokens), and temperature 0 makes
the answers the same every run ("2 + 2 = 4", 8 tokens, then "3 + 3 = 6").

Neither agent takes an answer cut short: Claude Code, told `stop_reason: "max_tokens"`, asks
the model to resume three times, then exits 1; Codex exits 1 on an incomplete response. So
the model must end its answers by itself, which this 135M model does not past the 8,192
tokens it was trained on (it writes punctuation to the cap). Hence the lean prompts, with
options a user has: Claude Code's minimal mode with one tool (`--bare --tools Read`, ~580
tokens) and Codex without its optional tool sets (`CODEX_LEAN`, ~5,700 tokens instead of
~9,300). The whole requests are sent, and answered, by `test_tool_round_trip.py`.

Each test checks what a user sees (the agent exits 0 and prints an answer, twice) and what
the server saw: two requests to the agent's route, both answered 200, the second carrying
the first turn (a longer prompt).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agents.agents import Agent, Turn, claude_code, codex
from tests.integration.conftest import MODEL, Server, run_server

pytestmark = pytest.mark.integration

CONTEXT = 32_768
MAX_NEW_TOKENS = 256


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    generation = {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0}
    flags = (
        *("--max-model-len", str(CONTEXT)),
        *("--override-generation-config", json.dumps(generation)),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
        with run_server(tmp_path_factory.mktemp("agents-server"), *flags) as running:
            yield running


def series(server: Server, prefix: str) -> dict[str, float]:
    """The /metrics series whose name and labels start with `prefix`."""
    text = httpx.get(f"{server.root}/metrics", timeout=10).text
    return {
        line.rsplit(maxsplit=1)[0]: float(line.rsplit(maxsplit=1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def prompt_tokens(server: Server) -> float:
    return sum(series(server, "oai_prompt_tokens_total").values())


def two_turns(server: Server, agent: Agent, first: list[str], second: list[str]) -> None:
    """Run both turns; each must print an answer, the second's prompt must hold the first's."""
    turns: list[tuple[Turn, float]] = []
    for args in (first, second):
        before = prompt_tokens(server)
        turn = agent.run(*args)
        turns.append((turn, prompt_tokens(server) - before))
        assert turn.stdout.strip(), f"no answer printed:\n{turn.stderr[-3000:]}"
        print(f"{args[0]}: {turn.seconds:.1f} s, {turns[-1][1]:.0f} prompt tokens, {turn.stdout!r}")
    assert turns[1][1] > turns[0][1]


def test_claude_code_print_then_continue(server: Server, tmp_path: Path) -> None:
    agent = claude_code(server.root, MODEL, tmp_path / "home", tmp_path)
    bare = ["-p", "--bare", "--tools", "Read"]
    two_turns(
        server,
        agent,
        [*bare, "--", "What is 2+2?"],
        [*bare, "--continue", "--", "And 3+3?"],
    )
    route = series(server, 'oai_requests_total{method="POST"')
    messages = {key: n for key, n in route.items() if 'route="/v1/messages"' in key}
    assert messages == {
        f'oai_requests_total{{method="POST",model="{MODEL}",route="/v1/messages",status="200"}}': 2
    }


# Codex's optional tool sets, off: with them its first prompt is ~9,300 tokens, past the
# 8,192 the model was trained on; without them ~5,700.
CODEX_LEAN = [
    f"--disable={feature}"
    for feature in ("multi_agent", "goals", "view_image", "image_generation", "apps", "plugins")
]


def test_codex_exec_then_resume(server: Server, tmp_path: Path) -> None:
    agent = codex(server.root, MODEL, tmp_path / "home", tmp_path)
    two_turns(
        server,
        agent,
        ["exec", *CODEX_LEAN, "--skip-git-repo-check", "What is 2+2?"],
        ["exec", *CODEX_LEAN, "resume", "--last", "--skip-git-repo-check", "And 3+3?"],
    )
    route = series(server, 'oai_requests_total{method="POST"')
    responses = {key: n for key, n in route.items() if 'route="/v1/responses"' in key}
    assert responses == {
        f'oai_requests_total{{method="POST",model="{MODEL}",route="/v1/responses",status="200"}}': 2
    }
