"""Stored responses with the official SDK, on SQLite and PostgreSQL: the tool loop over
`previous_response_id` (across a restart), retrieve, input items, delete, `store: false`,
per-key isolation."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from oai_server.engine.fake import FakeEngine
from tests.live import serve
from tests.responses.conftest import CALLED, WEATHER, app_on, prompt_of, weather_reply
from tests.store.conftest import KEYS, MODEL, sdk


def test_tool_loop_over_previous_response_id_survives_a_restart(
    store_url: str, template: Path
) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        first = client.responses.create(
            model=MODEL, input="Weather in Paris?", instructions="Use tools.", tools=[WEATHER]
        )
        (call,) = first.output
        assert call.type == "function_call"
        assert json.loads(call.arguments) == {"city": "Paris"}

    engine = FakeEngine(reply_for=weather_reply)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        second = client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
            tools=[WEATHER],
        )
        assert second.output_text == "It is sunny in Paris."
        assert second.previous_response_id == first.id
        prompt = prompt_of(engine)
        # The whole earlier turn, its function call included; not its instructions.
        assert "<|user|>Weather in Paris?" in prompt
        assert CALLED in prompt
        assert f"<|tool|>sunny[for {call.call_id}]" in prompt
        assert "Use tools." not in prompt

        third = client.responses.create(
            model=MODEL, previous_response_id=second.id, input="Thanks!", instructions="Be brief."
        )
        prompt = prompt_of(engine)
        assert prompt.startswith("<|system|>Be brief.")
        assert "<|assistant|>It is sunny in Paris." in prompt
        assert (
            prompt.index("Weather in Paris?") < prompt.index("sunny[for") < prompt.index("Thanks!")
        )
        assert client.responses.retrieve(third.id).output_text == third.output_text


def test_the_agent_loop_in_input_items(store_url: str, template: Path) -> None:
    """Multi-turn input in the Responses item format, as agents send it, store off."""
    engine = FakeEngine(reply_for=weather_reply)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        first = client.responses.create(model=MODEL, input="Weather?", tools=[WEATHER], store=False)
        history = [
            {"role": "user", "content": "Weather?"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": first.output[0].call_id, "output": "sunny"},  # type: ignore[union-attr]
        ]
        second = client.responses.create(model=MODEL, input=history, tools=[WEATHER], store=False)
        assert second.output_text == "It is sunny in Paris."
        assert CALLED in prompt_of(engine)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(second.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model=MODEL, input="x", previous_response_id=first.id)


def test_retrieve_input_items_delete(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply="Fine.")
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        turns = [{"role": "user", "content": f"message {i}"} for i in range(5)]
        made = client.responses.create(model=MODEL, input=turns, metadata={"a": "b"})
        got = client.responses.retrieve(made.id)
        assert got.model_dump() == made.model_dump()

        newest_first = [
            m.content[0].text for m in client.responses.input_items.list(made.id, limit=2)
        ]  # type: ignore[union-attr]
        assert newest_first == [f"message {i}" for i in reversed(range(5))]
        page = client.responses.input_items.list(made.id, limit=2, order="asc")
        assert page.has_more
        assert [m.content[0].text for m in page.data] == ["message 0", "message 1"]  # type: ignore[union-attr]

        client.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(made.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.input_items.list(made.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.delete(made.id)


def test_each_key_sees_only_its_own_responses(store_url: str, template: Path) -> None:
    app = app_on(store_url, template, FakeEngine(), api_key=KEYS)
    with serve(app) as base, sdk(base, "sk-alice") as alice, sdk(base, "sk-bob") as bob:
        mine = alice.responses.create(model=MODEL, input="secret")
        assert alice.responses.retrieve(mine.id).id == mine.id
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.create(model=MODEL, input="x", previous_response_id=mine.id)
        with pytest.raises(openai.NotFoundError):
            bob.responses.delete(mine.id)
        assert alice.responses.retrieve(mine.id).id == mine.id


def test_a_deleted_turn_ends_the_rebuilt_context(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply="ok")
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        first = client.responses.create(model=MODEL, input="alpha")
        second = client.responses.create(model=MODEL, input="beta", previous_response_id=first.id)
        third = client.responses.create(model=MODEL, input="gamma", previous_response_id=second.id)
        client.responses.create(model=MODEL, input="delta", previous_response_id=third.id)
        assert all(word in prompt_of(engine) for word in ("alpha", "beta", "gamma", "delta"))

        client.responses.delete(second.id)
        client.responses.create(model=MODEL, input="epsilon", previous_response_id=third.id)
        prompt = prompt_of(engine)
        assert "<|user|>gamma" in prompt
        assert "alpha" not in prompt
        assert "beta" not in prompt


def test_truncation_auto_drops_the_oldest_turns(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply="ok", max_model_len=400)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        previous = None
        for turn in range(6):
            made = client.responses.create(
                model=MODEL,
                input=f"turn {turn} " + "x" * 40,
                previous_response_id=previous,
                truncation="auto",
                max_output_tokens=50,
            )
            previous = made.id
        prompt = prompt_of(engine)
        assert "turn 5" in prompt
        assert "turn 0" not in prompt
        assert made.truncation == "auto"
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model=MODEL, input="more", previous_response_id=previous, max_output_tokens=50
            )
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["code"] == "context_length_exceeded"
