"""A real client on the Responses API: LangChain's `ChatOpenAI(use_responses_api=True)`."""

from __future__ import annotations

from pathlib import Path

import httpx
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from oai_server.engine.fake import FakeEngine
from tests.conformance import ValidatingTransport
from tests.live import serve
from tests.responses.conftest import CALLED, WEATHER, app_on, prompt_of, weather_reply
from tests.store.conftest import MODEL


def test_langchain_responses_api_tool_call_and_multi_turn(tmp_path: Path, template: Path) -> None:
    engine = FakeEngine(reply_for=weather_reply)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with (
        serve(app_on(url, template, engine)) as base,
        httpx.Client(transport=ValidatingTransport()) as http,
    ):
        llm = ChatOpenAI(
            model=MODEL,
            base_url=f"{base}/v1",
            api_key="sk-test",  # type: ignore[arg-type]
            use_responses_api=True,
            max_retries=0,
            http_client=http,
        )
        tools_llm = llm.bind_tools([WEATHER])
        question = HumanMessage("Weather in Paris?")
        called = tools_llm.invoke([question])
        assert isinstance(called, AIMessage)
        (call,) = called.tool_calls
        assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})

        answer = tools_llm.invoke(
            [question, called, ToolMessage("sunny", tool_call_id=call["id"] or "")]
        )
        assert answer.text == "It is sunny in Paris."
        assert CALLED in prompt_of(engine)
        assert "<|tool|>sunny" in prompt_of(engine)
