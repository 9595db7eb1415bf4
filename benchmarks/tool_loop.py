"""`python -m benchmarks tool-loop`: an agent's tool loop over one socket and over HTTP.

Each loop is `--turns` Responses turns on the fake engine, which answers every turn with
one tool call of fixed size (hermes format, so the server parses it as a call); the
client answers each call with a tool output of `--output-chars` characters. Three ways
to carry the loop, taking turns (A B C A B C) for `--rounds` rounds:

- ws: one WebSocket (`WS /v1/responses`), each turn `store: false`, the new input only,
  `previous_response_id` the last response: the socket remembers the chain.
- http-previous: streamed `POST /v1/responses`, `store: true`, the new input only,
  `previous_response_id`: each turn's context is read back from the store (SQLite).
- http-full: streamed `POST /v1/responses`, `store: false`, the whole history sent again
  each turn, as Codex does without WebSocket mode.

The server runs in a uvicorn process of its own (`benchmarks.asgi_serve`, a fresh data
directory), so its CPU time (user + system, from /proc) is the server's alone. Reported
per mode: the wall time of a loop (p50) and the server's CPU time per loop, and each
against ws within a round (the machine is shared and noisy: compare ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.proc_stats import tree_cpu_seconds
from benchmarks.server_process import ServerProcess, free_port, running

if TYPE_CHECKING:
    from fastapi import FastAPI

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

MODEL = "smollm2-135m-instruct"
MODES = ("ws", "http-previous", "http-full")
# The fake engine's answer to every turn: one call, the same tokens each time.
CALL = '<tool_call>{"name": "run", "arguments": {"command": "ls -la src/"}}</tool_call>'
TOOL = {
    "type": "function",
    "name": "run",
    "description": "Run a shell command.",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}
INSTRUCTIONS = "You are a coding agent. Use the tool to inspect the repository. " * 20
Loop = Callable[[str, int, int], Coroutine[Any, Any, None]]


def app() -> FastAPI:
    """The server measured: our app on the fake engine, every answer one tool call."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    delay = float(os.environ.get("OAI_BENCH_TOKEN_DELAY", "0"))
    # Byte-level tokens: a long loop needs a long context.
    engine = FakeEngine(reply=CALL, token_delay=delay, max_model_len=200_000)
    return create_app(Settings(), engine)


def _body(new_input: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "instructions": INSTRUCTIONS,
        "tools": [TOOL],
        "max_output_tokens": 64,
        "input": new_input,
        **extra,
    }


def _answer(response: dict[str, Any], output_chars: int) -> list[dict[str, Any]]:
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    if not calls:
        raise RuntimeError(f"the turn made no tool call: {response['output']}")
    return [
        {"type": "function_call_output", "call_id": c["call_id"], "output": "x" * output_chars}
        for c in calls
    ]


FIRST = [{"type": "message", "role": "user", "content": "List the source files."}]


async def ws_loop(root: str, turns: int, output_chars: int) -> None:
    import websockets

    url = root.replace("http", "ws", 1) + "/v1/responses"
    async with websockets.connect(url, max_size=None) as ws:
        previous: str | None = None
        new_input = FIRST
        for _ in range(turns):
            extra = {"store": False, "previous_response_id": previous}
            await ws.send(json.dumps({"type": "response.create", **_body(new_input, **extra)}))
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "response.completed":
                    break
                if event["type"] in ("error", "response.failed", "response.incomplete"):
                    raise RuntimeError(f"turn failed: {event}")
            previous = event["response"]["id"]
            new_input = _answer(event["response"], output_chars)


async def _http_turn(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    async with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as answer:
        answer.raise_for_status()
        async for line in answer.aiter_lines():
            if line.startswith("data: ") and '"response.completed"' in line:
                response: dict[str, Any] = json.loads(line[6:])["response"]
                return response
    raise RuntimeError("the stream ended without response.completed")


async def http_previous_loop(root: str, turns: int, output_chars: int) -> None:
    async with httpx.AsyncClient(base_url=root, timeout=60) as client:
        previous: str | None = None
        new_input = FIRST
        for _ in range(turns):
            body = _body(new_input, store=True, previous_response_id=previous)
            response = await _http_turn(client, body)
            previous = response["id"]
            new_input = _answer(response, output_chars)


async def http_full_loop(root: str, turns: int, output_chars: int) -> None:
    async with httpx.AsyncClient(base_url=root, timeout=60) as client:
        history: list[dict[str, Any]] = list(FIRST)
        for _ in range(turns):
            response = await _http_turn(client, _body(history, store=False))
            history += [*response["output"], *_answer(response, output_chars)]


LOOPS: dict[str, Loop] = {
    "ws": ws_loop,
    "http-previous": http_previous_loop,
    "http-full": http_full_loop,
}


def measure(root: str, pid: int, mode: str, args: argparse.Namespace) -> tuple[float, float]:
    """`args.loops` loops of `mode` one after another: wall s and server CPU s per loop."""
    loop = LOOPS[mode]
    walls: list[float] = []
    cpu_before = tree_cpu_seconds(pid)
    for _ in range(args.loops):
        began = time.perf_counter()
        asyncio.run(loop(root, args.turns, args.output_chars))
        walls.append(time.perf_counter() - began)
    cpu = (tree_cpu_seconds(pid) - cpu_before) / args.loops
    return statistics.median(walls), cpu


def _command(args: argparse.Namespace) -> None:
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.asgi_serve", "--factory"]
    command += ["benchmarks.tool_loop:app", "--port", str(port)]
    data_dir = tempfile.TemporaryDirectory(prefix="oai-tool-loop-")
    env = {
        **os.environ,
        "OAI_DATA_DIR": data_dir.name,
        "OAI_BENCH_TOKEN_DELAY": str(args.token_delay),
    }
    server = ServerProcess(command, port=port, log_path=Path(data_dir.name) / "server.log", env=env)
    rows: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with data_dir, running(server, timeout_s=120):
        for mode in MODES:  # a warm-up loop each, not counted
            asyncio.run(LOOPS[mode](server.root_url, args.turns, args.output_chars))
        for round_ in range(args.rounds):
            for mode in MODES:
                wall, cpu = measure(server.root_url, server.pid, mode, args)
                rows[mode].append((wall, cpu))
                print(
                    f"round {round_ + 1} {mode:14} loop p50 {wall * 1000:8.1f} ms  "
                    f"server CPU {cpu * 1000:8.1f} ms/loop",
                    flush=True,
                )
    print(
        f"\n{args.turns}-turn tool loop, {args.output_chars}-char tool outputs, "
        f"{args.loops} loops x {args.rounds} rounds (medians over rounds; ratio to ws per round)"
    )
    print(f"{'mode':14} {'loop ms':>9} {'CPU ms':>9} {'wall/ws':>8} {'CPU/ws':>8}")
    for mode in MODES:
        walls = [w for w, _ in rows[mode]]
        cpus = [c for _, c in rows[mode]]
        wall_ratio = [w / ws_w for (w, _), (ws_w, _) in zip(rows[mode], rows["ws"], strict=True)]
        cpu_ratio = [c / ws_c for (_, c), (_, ws_c) in zip(rows[mode], rows["ws"], strict=True)]
        print(
            f"{mode:14} {statistics.median(walls) * 1000:9.1f} "
            f"{statistics.median(cpus) * 1000:9.1f} "
            f"{statistics.median(wall_ratio):8.2f} {statistics.median(cpu_ratio):8.2f}"
        )


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "tool-loop",
        help="a 20-turn tool loop over one WebSocket against HTTP (fake engine)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--loops", type=int, default=5, help="per mode and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output-chars", type=int, default=2000, help="each tool output's")
    parser.add_argument("--token-delay", type=float, default=0.0, metavar="S")
    parser.set_defaults(handler=_command)
