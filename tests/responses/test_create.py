"""`POST /v1/responses` with the official SDK: whole, streamed, tools, formats, refusals."""

from __future__ import annotations

import json

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.conformance import validating_client
from tests.live import serve
from tests.responses.conftest import CALL, WEATHER
from tests.store.conftest import MODEL, sdk


def app(engine: FakeEngine | None = None) -> object:
    return create_app(Settings(), engine or FakeEngine())


def test_text_whole_and_streamed_agree() -> None:
    with serve(app(FakeEngine(reply="Hello there, friend."))) as base, sdk(base) as client:
        whole = client.responses.create(
            model=MODEL, input="Hi", instructions="Be kind.", metadata={"k": "v"}
        )
        assert whole.status == "completed"
        assert whole.output_text == "Hello there, friend."
        assert whole.instructions == "Be kind."
        assert whole.metadata == {"k": "v"}
        assert whole.usage is not None
        assert whole.usage.output_tokens == 3
        assert whole.usage.input_tokens > 0
        assert whole.usage.total_tokens == whole.usage.input_tokens + 3

        events = list(
            client.responses.create(
                model=MODEL, input="Hi", stream=True, instructions="Be kind.", metadata={"k": "v"}
            )
        )
        kinds = [e.type for e in events]
        assert kinds == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            *["response.output_text.delta"] * 3,
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1].response  # type: ignore[union-attr]
        ignore = {"id", "created_at", "completed_at", "output"}
        assert final.model_dump(exclude=ignore) == whole.model_dump(exclude=ignore)
        assert [o.model_dump(exclude={"id"}) for o in final.output] == [
            o.model_dump(exclude={"id"}) for o in whole.output
        ]


def test_stream_helper_and_max_output_tokens_incomplete() -> None:
    with serve(app(FakeEngine(reply="one two three four five"))) as base, sdk(base) as client:
        with client.responses.stream(model=MODEL, input="Count") as stream:
            text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
            final = stream.get_final_response()
        assert text == final.output_text == "one two three four five"

        cut = client.responses.create(model=MODEL, input="Count", max_output_tokens=2)
        assert cut.status == "incomplete"
        assert cut.incomplete_details is not None
        assert cut.incomplete_details.reason == "max_output_tokens"
        assert cut.output_text == "one two"
        events = list(
            client.responses.create(model=MODEL, input="Count", max_output_tokens=2, stream=True)
        )
        assert events[-1].type == "response.incomplete"


def test_function_call_streamed_and_tool_choice() -> None:
    engine = FakeEngine(tokens=[CALL])
    with serve(app(engine)) as base, sdk(base) as client:
        events = list(
            client.responses.create(model=MODEL, input="Weather?", tools=[WEATHER], stream=True)
        )
        kinds = [e.type for e in events]
        assert kinds[2:] == [
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
        (call,) = events[-1].response.output  # type: ignore[union-attr]
        assert call.type == "function_call"
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
        assert call.call_id
        assert call.status == "completed"

        none = client.responses.create(
            model=MODEL, input="Weather?", tools=[WEATHER], tool_choice="none"
        )
        assert none.output[0].type == "message"


def test_text_format_reaches_the_engine() -> None:
    engine = FakeEngine(reply='{"a": 1}')
    with serve(app(engine)) as base, sdk(base) as client:
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
        out = client.responses.create(
            model=MODEL,
            input="JSON",
            text={"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": True}},
        )
        assert json.loads(out.output_text) == {"a": 1}
        assert engine.calls[-1].options.structured is not None
        assert engine.calls[-1].options.structured.json_schema == schema
        client.responses.create(model=MODEL, input="JSON", text={"format": {"type": "json_object"}})
        assert engine.calls[-1].options.structured is not None
        assert engine.calls[-1].options.structured.json_object


@pytest.mark.parametrize(
    ("options", "param"),
    [
        # A hosted tool is accepted (not offered); forcing one cannot be served.
        (
            {"tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search_preview"}},
            "tool_choice",
        ),
        (
            # This model takes no images (the vision tests serve one that does).
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio", "data": "x"}]}]},
            "input[0].content",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        ({"model": "gpt-4o"}, "model"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_what_cannot_be_served_is_refused_by_name(options: dict[str, object], param: str) -> None:
    with serve(app()) as base, sdk(base) as client:
        request = {"model": MODEL, "input": "Hi", **options}
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(**request)  # type: ignore[call-overload]
        assert caught.value.status_code in (400, 404)
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == param


def test_input_tokens_counts_the_prompt() -> None:
    engine = FakeEngine()
    with serve(app(engine)) as base, sdk(base) as client:
        counted = client.responses.input_tokens.count(model=MODEL, input="Hello")
        out = client.responses.create(model=MODEL, input="Hello")
        assert out.usage is not None
        assert counted.input_tokens == out.usage.input_tokens


def test_input_tokens_count_the_template_the_tools_and_the_instructions() -> None:
    engine = FakeEngine()
    ask = {"model": MODEL, "input": "Weather in Paris?", "instructions": "Be brief."}
    with serve(app(engine)) as base, sdk(base) as client:
        bare = client.responses.input_tokens.count(**ask)  # type: ignore[arg-type]
        counted = client.responses.input_tokens.count(**ask, tools=[WEATHER])  # type: ignore[arg-type]
        out = client.responses.create(**ask, tools=[WEATHER])  # type: ignore[arg-type]
        assert out.usage is not None
        # The exact prompt: the template writes the tools' schemas into it.
        assert (
            counted.input_tokens == out.usage.input_tokens == len(engine.calls[-1].prompt_token_ids)
        )
        assert counted.input_tokens > bare.input_tokens + len(WEATHER["description"])


def test_prefix_cache_hits_are_reported_as_chat_completions_report_them() -> None:
    engine = FakeEngine(prefix_cache=True)
    instructions = "You answer questions about the weather, briefly and politely. " * 4
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": "Hello"},
    ]
    with serve(app(engine)) as base, sdk(base) as client:
        first = client.responses.create(model=MODEL, input="Hello", instructions=instructions)
        assert first.usage is not None
        assert first.usage.input_tokens_details.cached_tokens == 0

        chat = client.chat.completions.create(model=MODEL, messages=messages)
        assert chat.usage is not None
        assert chat.usage.prompt_tokens_details is not None
        cached = chat.usage.prompt_tokens_details.cached_tokens
        assert cached is not None
        assert cached > len(instructions) / 2

        again = client.responses.create(model=MODEL, input="Hello", instructions=instructions)
        assert again.usage is not None
        assert again.usage.input_tokens_details.cached_tokens == cached
        events = list(
            client.responses.create(
                model=MODEL, input="Hello", instructions=instructions, stream=True
            )
        )
        assert events[-1].type == "response.completed"
        assert events[-1].response.usage == again.usage


def test_failure_mid_stream_is_response_failed() -> None:
    engine = FakeEngine(reply="a b c d", fail_at_step=2)
    body = {"model": MODEL, "input": "x", "stream": True}
    with serve(app(engine)) as base, validating_client() as http:
        with http.stream("POST", f"{base}/v1/responses", json=body) as r:
            lines = [line for line in r.iter_lines() if line.startswith("event: ")]
        assert lines[-1] == "event: response.failed"
