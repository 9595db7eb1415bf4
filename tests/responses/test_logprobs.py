"""`top_logprobs` and `include: ["message.output_text.logprobs"]` on `/v1/responses`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.types import GenerationStep, SamplingOptions, TokenLogprob
from oai_server.settings import Settings
from tests.live import serve
from tests.store.conftest import MODEL, sdk

INCLUDE = ["message.output_text.logprobs"]
REPLY = "Sunny and warm today."


@dataclass
class ScoringEngine(FakeEngine):
    """The fake engine, scoring each piece it sends as one token when logprobs are asked for:
    the n-th token's logprob is -n/10, its alternatives `alt0`, `alt1`... score lower."""

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        scored = 0
        async for step in super().generate(request_id, prompt_token_ids, options):
            for choice in step.choices:
                if options.logprobs is not None:
                    scored += 1
                    top = tuple((f"alt{k}", -1.0 - k) for k in range(options.logprobs))
                    choice.logprobs = [TokenLogprob(choice.text, -scored / 10, top)]
            yield step


def test_logprobs_on_the_text_whole_and_streamed() -> None:
    engine = ScoringEngine(reply=REPLY)
    with serve(create_app(Settings(), engine)) as base, sdk(base) as client:
        whole = client.responses.create(model=MODEL, input="Hi", include=INCLUDE, top_logprobs=2)
        assert engine.calls[-1].options.logprobs == 2
        (part,) = whole.output[0].content  # type: ignore[union-attr]
        assert part.type == "output_text"
        assert "".join(p.token for p in part.logprobs or ()) == REPLY
        assert [p.logprob for p in part.logprobs or ()] == [-0.1, -0.2, -0.3, -0.4]
        first = (part.logprobs or [])[0]
        assert first.bytes == list(b"Sunny")
        assert [(t.token, t.logprob) for t in first.top_logprobs] == [
            ("alt0", -1.0),
            ("alt1", -2.0),
        ]
        assert whole.top_logprobs == 2

        events = list(
            client.responses.create(
                model=MODEL, input="Hi", include=INCLUDE, top_logprobs=2, stream=True
            )
        )
        deltas = [e for e in events if e.type == "response.output_text.delta"]
        assert [[lp.token for lp in e.logprobs] for e in deltas] == [[e.delta] for e in deltas]
        (done,) = [e for e in events if e.type == "response.output_text.done"]
        assert [(lp.token, lp.logprob) for lp in done.logprobs] == [
            (p.token, p.logprob) for p in part.logprobs or ()
        ]
        final = events[-1]
        assert final.type == "response.completed"
        streamed_part = final.response.output[0].content[0]  # type: ignore[union-attr]
        assert streamed_part == part


@pytest.mark.parametrize(
    "options", [{"include": INCLUDE}, {"top_logprobs": 0}], ids=["include", "top_logprobs"]
)
def test_either_field_alone_asks_for_the_chosen_tokens(options: dict[str, object]) -> None:
    engine = ScoringEngine(reply=REPLY)
    with serve(create_app(Settings(), engine)) as base, sdk(base) as client:
        out = client.responses.create(model=MODEL, input="Hi", **options)  # type: ignore[call-overload]
        assert engine.calls[-1].options.logprobs == 0
        part = out.output[0].content[0]
        assert len(part.logprobs) == 4
        assert all(p.top_logprobs == [] for p in part.logprobs)


def test_no_logprobs_unless_asked() -> None:
    engine = ScoringEngine(reply=REPLY)
    with serve(create_app(Settings(), engine)) as base, sdk(base) as client:
        out = client.responses.create(model=MODEL, input="Hi")
        assert engine.calls[-1].options.logprobs is None
        assert out.output[0].content[0].logprobs == []  # type: ignore[union-attr]
        assert out.top_logprobs == 0  # an integer in Open Responses: 0, none asked for

        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=MODEL, input="Hi", top_logprobs=21)
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == "top_logprobs"


def test_a_function_calls_tokens_are_not_text() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    engine = ScoringEngine(reply=call)
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    with serve(create_app(Settings(), engine)) as base, sdk(base) as client:
        out = client.responses.create(
            model=MODEL,
            input="Weather?",
            tools=[tool],
            include=INCLUDE,  # type: ignore[list-item]
        )
        assert [item.type for item in out.output] == ["function_call"]
