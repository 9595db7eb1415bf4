"""`benchmarks tool-loop`: its three ways of carrying a tool loop give the model one context."""

from __future__ import annotations

from benchmarks.tool_loop import CALL, LOOPS
from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve_async

TURNS = 3


async def test_each_mode_sends_the_model_the_same_growing_prompts() -> None:
    prompts: dict[str, list[int]] = {}
    for mode, loop in LOOPS.items():
        engine = FakeEngine(reply=CALL, max_model_len=200_000)
        async with serve_async(create_app(Settings(), engine)) as root:
            await loop(root, TURNS, 100)
        prompts[mode] = [len(call.prompt_token_ids) for call in engine.calls]
    # Call ids differ between runs but not their length: the same context, turn by turn.
    assert prompts["ws"] == prompts["http-previous"] == prompts["http-full"]
    assert len(prompts["ws"]) == TURNS
    assert prompts["ws"][0] < prompts["ws"][1] < prompts["ws"][2]
