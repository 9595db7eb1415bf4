"""Message Batches through the `anthropic` SDK's `client.messages.batches`, on the Batch
API's runner: create, poll, results, list, cancel and delete, each in the SDK's types."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from oai_server.anthropic import batches
from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import KEY, MODEL, client, server


def _params(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


@contextmanager
def _sdk(
    tmp_path: Path, engine: FakeEngine, **extra: Any
) -> Iterator[tuple[str, anthropic.Anthropic]]:
    settings = {"store_url": f"sqlite:///{tmp_path / 'store.db'}", "batch_idle_seconds": 0}
    with server(engine, **settings, **extra) as root:
        yield root, client(root)


def _ended(sdk: anthropic.Anthropic, batch_id: str) -> Any:
    deadline = time.monotonic() + 60
    while True:
        batch = sdk.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)


def test_a_batch_answers_each_request_as_the_live_route_would(tmp_path: Path) -> None:
    engine = FakeEngine(reply="Bonjour")
    with _sdk(tmp_path, engine) as (_, sdk):
        live = sdk.messages.create(**_params("hello"))
        created = sdk.messages.batches.create(
            requests=[
                {"custom_id": "first", "params": _params("hello")},
                {"custom_id": "second", "params": _params("hi", system="Be brief.")},
            ]
        )
        assert created.id.startswith("msgbatch_")
        assert created.processing_status == "in_progress"
        assert created.request_counts.processing == 2
        assert created.results_url is None
        done = _ended(sdk, created.id)
        results = {r.custom_id: r.result for r in sdk.messages.batches.results(created.id)}
    assert done.request_counts.succeeded == 2
    assert done.request_counts.processing == 0
    assert done.ended_at is not None
    assert done.results_url is not None
    assert done.results_url.endswith(f"/v1/messages/batches/{created.id}/results")
    assert set(results) == {"first", "second"}
    for result in results.values():
        assert result.type == "succeeded"
        assert result.message.content[0].type == "text"
        assert result.message.content[0].text == "Bonjour"
        assert result.message.stop_reason == "end_turn"
    first = results["first"]
    assert first.type == "succeeded"
    assert first.message.usage.input_tokens == live.usage.input_tokens
    # The system prompt reached the template, as on the live route.
    assert any("Be brief." in bytes(c.prompt_token_ids).decode() for c in engine.calls)


def test_a_cancelled_batch_ends_with_its_unrun_requests_canceled(tmp_path: Path) -> None:
    engine = FakeEngine(tokens=["tick "] * 50, token_delay=0.02)
    with _sdk(tmp_path, engine) as (_, sdk):
        requests = [{"custom_id": f"r{i}", "params": _params(f"q{i}")} for i in range(60)]
        created = sdk.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        cancelling = sdk.messages.batches.cancel(created.id)
        assert cancelling.processing_status in ("canceling", "ended")
        assert cancelling.cancel_initiated_at is not None
        done = _ended(sdk, created.id)
        results = list(sdk.messages.batches.results(created.id))
    counts = done.request_counts
    assert counts.canceled > 0
    assert counts.succeeded + counts.canceled + counts.errored == 60
    assert sorted(r.custom_id for r in results) == sorted(f"r{i}" for i in range(60))
    assert sum(r.result.type == "canceled" for r in results) == counts.canceled


def test_a_request_that_fails_when_it_runs_is_errored_with_anthropics_error(
    tmp_path: Path,
) -> None:
    def reply(prompt: str) -> str:
        if "fail here" in prompt:
            raise RuntimeError("the engine broke on this one")
        return "Bonjour"

    engine = FakeEngine(reply_for=reply)
    with _sdk(tmp_path, engine) as (_, sdk):
        created = sdk.messages.batches.create(
            requests=[
                {"custom_id": "fine", "params": _params("hello")},
                {"custom_id": "broken", "params": _params("fail here")},
            ]
        )
        done = _ended(sdk, created.id)
        results = {r.custom_id: r.result for r in sdk.messages.batches.results(created.id)}
    assert (done.request_counts.succeeded, done.request_counts.errored) == (1, 1)
    assert results["fine"].type == "succeeded"
    errored = results["broken"]
    assert errored.type == "errored"
    assert errored.error.error.type == "api_error"
    assert "engine broke" not in errored.error.error.message  # no internals


def test_requests_the_window_closed_on_are_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "WINDOW_S", 1)
    engine = FakeEngine(tokens=["tick "] * 50, token_delay=0.02)
    settings = {"batch_max_in_flight": 1, "batch_max_in_flight_idle": 1}
    with _sdk(tmp_path, engine, **settings) as (_, sdk):
        requests = [{"custom_id": f"r{i}", "params": _params(f"q{i}")} for i in range(30)]
        created = sdk.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        done = _ended(sdk, created.id)
        results = list(sdk.messages.batches.results(created.id))
    counts = done.request_counts
    assert counts.expired > 0
    assert counts.succeeded + counts.expired == 30
    assert sorted(r.custom_id for r in results) == sorted(f"r{i}" for i in range(30))
    assert sum(r.result.type == "expired" for r in results) == counts.expired


def test_batches_are_listed_newest_first_in_pages_and_deleted_once_ended(tmp_path: Path) -> None:
    with _sdk(tmp_path, FakeEngine(reply="ok")) as (root, sdk):
        ids = [
            sdk.messages.batches.create(
                requests=[{"custom_id": "only", "params": _params(f"q{i}")}]
            ).id
            for i in range(3)
        ]
        first = sdk.messages.batches.list(limit=2)
        assert [b.id for b in first.data] == ids[:0:-1]
        assert first.has_more
        assert first.last_id == ids[1]
        rest = sdk.messages.batches.list(limit=2, after_id=ids[1])
        assert [b.id for b in rest.data] == [ids[0]]
        assert not rest.has_more
        back = sdk.messages.batches.list(limit=2, before_id=ids[0])
        assert [b.id for b in back.data] == ids[:0:-1]
        assert [b.id for b in sdk.messages.batches.list(limit=20).data] == ids[::-1]

        for batch_id in ids:
            _ended(sdk, batch_id)
        deleted = sdk.messages.batches.delete(ids[0])
        assert (deleted.id, deleted.type) == (ids[0], "message_batch_deleted")
        with pytest.raises(anthropic.NotFoundError) as missing:
            sdk.messages.batches.retrieve(ids[0])
        assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
        # Message Batches are batches of the Batch API too: its list reads them.
        with openai.OpenAI(base_url=f"{root}/v1", api_key=KEY, max_retries=0) as oai:
            listed = {b.id: b.endpoint for b in oai.batches.list()}
        assert listed == {ids[1]: "/v1/messages", ids[2]: "/v1/messages"}


def test_refusals_are_anthropic_errors(tmp_path: Path) -> None:
    engine = FakeEngine(tokens=["tick "] * 50, token_delay=0.05)
    with _sdk(tmp_path, engine) as (root, sdk):
        with pytest.raises(anthropic.BadRequestError) as bad:
            sdk.messages.batches.create(
                requests=[
                    {"custom_id": "a", "params": _params("q")},
                    {"custom_id": "a", "params": _params("q")},
                ]
            )
        assert "custom_id" in bad.value.message
        with pytest.raises(anthropic.BadRequestError) as streamed:
            sdk.messages.batches.create(
                requests=[{"custom_id": "a", "params": _params("q", stream=True)}]
            )
        assert "requests[0].params.stream" in streamed.value.message
        reply = httpx.post(
            f"{root}/v1/messages/batches",
            json={"requests": [{"custom_id": "a", "params": {"model": MODEL}}]},
            headers={"x-api-key": KEY},
        )
        assert reply.status_code == 400
        assert reply.json()["type"] == "error"
        assert reply.json()["error"]["type"] == "invalid_request_error"
        assert "'requests[0].params.messages'" in reply.json()["error"]["message"]
        with pytest.raises(anthropic.NotFoundError):
            sdk.messages.batches.retrieve("msgbatch_nothing")
        running = sdk.messages.batches.create(
            requests=[{"custom_id": f"r{i}", "params": _params("q")} for i in range(20)]
        )
        with pytest.raises(anthropic.BadRequestError):
            sdk.messages.batches.delete(running.id)  # not ended
        unfinished = httpx.get(
            f"{root}/v1/messages/batches/{running.id}/results", headers={"x-api-key": KEY}
        )
        assert unfinished.status_code == 400
        assert unfinished.json()["error"]["type"] == "invalid_request_error"
        sdk.messages.batches.cancel(running.id)
