"""Background responses with the official SDK: queued, polled, resumed from a sequence
number, cancelled."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import pytest

from oai_server.engine.fake import FakeEngine
from tests.live import serve
from tests.responses.conftest import app_on
from tests.store.conftest import MODEL, sdk


def wait_until_done(client: openai.OpenAI, response_id: str) -> openai.types.responses.Response:
    deadline = time.monotonic() + 60  # generous for a loaded machine: a done one returns
    while True:
        got = client.responses.retrieve(response_id)
        if got.status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def test_poll_and_resume_the_stream(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply="one two three", token_delay=0.02)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        queued = client.responses.create(model=MODEL, input="Count", background=True)
        assert queued.status == "queued"
        assert queued.background
        done = wait_until_done(client, queued.id)
        assert done.status == "completed"
        assert done.output_text == "one two three"

        events = list(client.responses.retrieve(queued.id, stream=True, starting_after=4))
        assert events[0].sequence_number == 5
        assert events[-1].type == "response.completed"
        all_events = list(client.responses.retrieve(queued.id, stream=True))
        assert [e.sequence_number for e in all_events] == list(range(len(all_events)))
        assert all_events[5:] == events

        streamed = list(
            client.responses.create(model=MODEL, input="Count", background=True, stream=True)
        )
        assert streamed[0].type == "response.created"
        assert streamed[-1].type == "response.completed"
        assert [i.id for i in client.responses.input_items.list(streamed[-1].response.id)]  # type: ignore[union-attr]


def test_cancel_a_running_response(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply=" ".join(["word"] * 500), token_delay=0.05)  # 25 s: cancelled first
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        queued = client.responses.create(model=MODEL, input="Talk", background=True)
        # Cancelled once it runs (a loaded machine may not have started it after a fixed
        # pause, and a queued response is cancelled without reaching the engine).
        deadline = time.monotonic() + 30
        while not engine.running_requests():  # polling the fake engine
            assert time.monotonic() < deadline, "the response never reached the engine"
            time.sleep(0.01)
        cancelled = client.responses.cancel(queued.id)
        assert cancelled.status == "cancelled"
        assert client.responses.retrieve(queued.id).status == "cancelled"
        assert engine.aborted

        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input="x", background=True, store=False)
        plain = client.responses.create(model=MODEL, input="x", max_output_tokens=3)
        with pytest.raises(openai.BadRequestError):
            client.responses.cancel(plain.id)
