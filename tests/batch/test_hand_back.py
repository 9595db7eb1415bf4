"""A chat request that comes while the idle cap's lines hold the engine: the lines beyond
the small cap are handed back before the request reaches the engine, not after it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from oai_server.engine.fake import FakeEngine, FakeTokenizer
from oai_server.engine.types import GenerationStep, SamplingOptions
from tests.batch.helpers import chat_line, read_lines, runs_to_the_end, upload, wait
from tests.live import serve
from tests.store.conftest import ask, make_app, sdk


@dataclass
class LoggingEngine(FakeEngine):
    """The fake engine, with the order in which requests reached it and were aborted."""

    log: list[str] = field(default_factory=list)

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        chat = "interactive" in FakeTokenizer().decode(prompt_token_ids)
        self.log.append("chat" if chat else "line")
        async for step in super().generate(request_id, prompt_token_ids, options):
            yield step

    async def abort(self, request_id: str) -> None:
        if request_id in self._running:
            self.log.append("abort")
        await super().abort(request_id)


def test_the_lines_beyond_the_small_cap_leave_the_engine_before_the_chat_request_enters(
    store_url: str,
) -> None:
    engine = LoggingEngine(token_delay=0.05)
    app = make_app(store_url, engine, batch_max_in_flight=2, batch_max_in_flight_idle=8)
    with serve(app) as base, sdk(base) as client:
        lines = [chat_line(f"r{i}", f"q{i}", max_tokens=20) for i in range(12)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 20
        while engine.running_requests() < 8:  # the idle engine's capacity, taken
            assert time.monotonic() < deadline, "the idle cap's lines never ran"
            time.sleep(0.01)
        ask(client, "an interactive question", max_tokens=4)
        chat = engine.log.index("chat")
        assert engine.log[:chat].count("abort") == 6, engine.log
        assert "abort" not in engine.log[chat:], "a line was handed back after the chat came"
        done = wait(client, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 12)
        output = read_lines(client, done.output_file_id)
        assert sorted(line["custom_id"] for line in output) == sorted(f"r{i}" for i in range(12))
    assert runs_to_the_end(engine) == sorted(f"q{i}" for i in range(12))
    assert engine.log.count("line") == 12 + 6  # each handed-back line started again, once


def test_a_chat_request_with_no_idle_lines_beside_it_hands_nothing_back(store_url: str) -> None:
    engine = LoggingEngine(token_delay=0.05)
    app = make_app(store_url, engine, batch_max_in_flight=2, batch_max_in_flight_idle=8)
    with serve(app) as base, sdk(base) as client:
        lines = [chat_line(f"r{i}", f"q{i}", max_tokens=20) for i in range(2)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 20
        while engine.running_requests() < 2:
            assert time.monotonic() < deadline, "the lines never ran"
            time.sleep(0.01)
        ask(client, "an interactive question", max_tokens=4)
        done = wait(client, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 2)
    assert "abort" not in engine.log, "lines within the small cap were handed back"
    assert runs_to_the_end(engine) == ["q0", "q1"]
