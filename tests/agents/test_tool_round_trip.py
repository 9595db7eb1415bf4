"""Each agent runs a tool the model called and sends its output back (fake engine).

The embedded 135M model does not call tools by itself, so a fake engine behind a real
uvicorn plays the model: until the prompt holds the tool's output, it answers with a call
in the Hermes dialect that the server's built-in parser reads (`<tool_call>{json}</tool_call>`,
the fake model's dialect), then with a sentence naming what the tool returned. The token
is only in a file of the agent's working directory: it reaches the second request only if
the agent ran the tool and sent its output back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.types import Receive, Scope, Send

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.agents.agents import Agent, claude_code, codex
from tests.live import serve

MODEL = "smollm2-135m-instruct"
TOKEN = "quokka-5531"
ANSWER = f"The file holds {TOKEN}."
# Room for the agents' prompts in the fake's byte-level tokens (Claude Code's is ~50 KB).
CONTEXT = 200_000


def tool_call(name: str, arguments: dict[str, str]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def scripted(call: str) -> FakeEngine:
    """A model that calls the tool until the prompt holds its output, then answers."""
    return FakeEngine(
        reply_for=lambda prompt: ANSWER if TOKEN in prompt else call, max_model_len=CONTEXT
    )


def prompts(engine: FakeEngine) -> list[str]:
    """The prompts the engine was given, one per request, as the model saw them."""
    return [bytes(call.prompt_token_ids).decode(errors="replace") for call in engine.calls]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "token.txt").write_text(f"{TOKEN}\n")
    return work


def run_scripted(
    agent: Callable[[str, str, Path, Path], Agent], call: str, tmp_path: Path, *args: str
) -> tuple[str, FakeEngine]:
    """One turn of `agent` against a server on a model scripted to answer `call` first:
    what the agent printed, and the engine (its record of the prompts)."""
    engine = scripted(call)
    with serve(create_app(Settings(), engine)) as root:
        turn = agent(root, MODEL, tmp_path / "home", tmp_path / "work").run(*args)
    return turn.stdout, engine


def test_codex_runs_exec_command_and_sends_its_output_back(tmp_path: Path, workdir: Path) -> None:
    call = tool_call("exec_command", {"cmd": "cat token.txt"})
    printed, engine = run_scripted(
        codex, call, tmp_path, "exec", "--skip-git-repo-check", "What is in token.txt?"
    )
    first, second = prompts(engine)
    assert TOKEN not in first
    assert TOKEN in second.split("What is in token.txt?")[-1]
    assert printed.strip() == ANSWER


def test_codex_in_websocket_mode_runs_the_tool_over_one_socket(
    tmp_path: Path, workdir: Path
) -> None:
    engine = scripted(tool_call("exec_command", {"cmd": "cat token.txt"}))
    app = create_app(Settings(), engine)
    sockets: list[str] = []

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            sockets.append(scope["path"])
        await app(scope, receive, send)

    with serve(recording) as root:
        agent = codex(root, MODEL, tmp_path / "home", workdir, websockets=True)
        turn = agent.run("exec", "--skip-git-repo-check", "What is in token.txt?")
    # Codex warms the socket first (`generate: false`: prefilled, one token dropped).
    warm, first, second = prompts(engine)
    assert engine.calls[0].options.max_tokens == 1
    assert first[:2000] == warm[:2000]  # Codex's instructions, warmed
    assert sockets == ["/v1/responses"]  # the warm-up and both turns on one socket
    assert TOKEN not in first
    assert TOKEN in second.split("What is in token.txt?")[-1]
    assert turn.stdout.strip() == ANSWER


def test_claude_code_runs_read_and_sends_its_output_back(tmp_path: Path, workdir: Path) -> None:
    call = tool_call("Read", {"file_path": str(workdir / "token.txt")})
    printed, engine = run_scripted(claude_code, call, tmp_path, "-p", "What is in token.txt?")
    first, second = prompts(engine)
    assert TOKEN not in first
    assert TOKEN in second.split("What is in token.txt?")[-1]
    assert printed.strip() == ANSWER
