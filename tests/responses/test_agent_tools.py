"""The tools agents send on Responses: namespaces, custom tools, hosted tools, allowed_tools.

Codex sends its functions grouped in a `namespace`, `apply_patch` as a custom tool with a
Lark grammar, and OpenAI's hosted `web_search`; the fake engine is scripted to call them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from oai_server.engine.fake import FakeEngine
from tests.responses.conftest import WEATHER
from tests.unit.conftest import MODEL, serve
from tests.unit.test_custom_tools import GRAMMAR, PATCH, hermes_call, prompt_of

SPAWN = {
    "type": "function",
    "name": "spawn_agent",
    "description": "Start a sub-agent.",
    "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [SPAWN, {"type": "function", "name": "wait_agent", "parameters": {}}],
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}


def sse_events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for block in text.split("\n\n")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]


async def create(client: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "input": "Go", "store": False, **fields}
    return await client.post("/v1/responses", json=body)


async def test_a_namespace_function_is_offered_and_its_call_names_the_namespace() -> None:
    call = json.dumps({"name": "multi_agent_v1.spawn_agent", "arguments": {"task": "tests"}})
    engine = FakeEngine(tokens=hermes_call(call))
    async with serve(engine) as client:
        whole = await create(client, tools=[AGENTS, WEATHER])
        streamed = await create(client, tools=[AGENTS, WEATHER], stream=True)
    assert whole.status_code == 200, whole.text
    assert '"name": "multi_agent_v1.spawn_agent"' in prompt_of(engine)
    (item,) = [i for i in whole.json()["output"] if i["type"] == "function_call"]
    assert (item["namespace"], item["name"]) == ("multi_agent_v1", "spawn_agent")
    assert json.loads(item["arguments"]) == {"task": "tests"}
    events = sse_events(streamed.text)
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert [(i["type"], i.get("namespace"), i.get("name")) for i in added[1:]] == [
        ("function_call", "multi_agent_v1", "spawn_agent")
    ]
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert done[0]["name"] == "spawn_agent"


async def test_a_namespaced_call_sent_back_reaches_the_model_under_its_full_name() -> None:
    engine = FakeEngine()
    earlier = [
        {"role": "user", "content": "Go"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "namespace": "multi_agent_v1",
            "name": "spawn_agent",
            "arguments": '{"task": "tests"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "started"},
    ]
    async with serve(engine) as client:
        reply = await create(client, input=earlier, tools=[AGENTS])
    assert reply.status_code == 200, reply.text
    assert '"name": "multi_agent_v1.spawn_agent", "arguments": {"task": "tests"}' in prompt_of(
        engine
    )


async def test_a_custom_tool_call_streams_its_input() -> None:
    call = json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}})
    async with serve(FakeEngine(tokens=hermes_call(call))) as client:
        whole = await create(client, tools=[APPLY_PATCH, WEB_SEARCH])
        streamed = await create(client, tools=[APPLY_PATCH, WEB_SEARCH], stream=True)
    (item,) = [i for i in whole.json()["output"] if i["type"] == "custom_tool_call"]
    assert (item["name"], item["input"], item["status"]) == ("apply_patch", PATCH, "completed")
    assert item["call_id"].startswith("call_")
    events = sse_events(streamed.text)
    deltas = [e for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(e["delta"] for e in deltas) == PATCH
    (done,) = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == PATCH
    assert done["item_id"] == deltas[0]["item_id"]
    final = events[-1]["response"]["output"]
    assert [i["type"] for i in final] == ["message", "custom_tool_call"]


async def test_a_forced_custom_tool_decodes_under_its_grammar() -> None:
    engine = FakeEngine(reply=PATCH)
    async with serve(engine) as client:
        reply = await create(
            client,
            tools=[APPLY_PATCH, WEATHER],
            tool_choice={"type": "custom", "name": "apply_patch"},
        )
    structured = engine.calls[0].options.structured
    assert structured is not None
    assert structured.grammar == GRAMMAR
    (item,) = reply.json()["output"]
    assert (item["type"], item["input"]) == ("custom_tool_call", PATCH)
    assert reply.json()["tool_choice"] == {"type": "custom", "name": "apply_patch"}


async def test_a_custom_call_and_its_output_are_taken_as_input() -> None:
    engine = FakeEngine()
    earlier = [
        {"role": "user", "content": "Add a.txt"},
        {"type": "custom_tool_call", "call_id": "call_7", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_7", "output": "Applied."},
    ]
    async with serve(engine) as client:
        reply = await create(client, input=earlier, tools=[APPLY_PATCH])
    assert reply.status_code == 200, reply.text
    prompt = prompt_of(engine)
    written = json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}}, ensure_ascii=False)
    assert written in prompt
    assert "Applied." in prompt


async def test_hosted_tools_are_accepted_and_not_offered() -> None:
    engine = FakeEngine()
    hosted = [
        WEB_SEARCH,
        {"type": "web_search_preview"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "image_generation"},
        {"type": "mcp", "server_label": "deepwiki", "server_url": "https://example.com/mcp"},
        {"type": "local_shell"},
    ]
    async with serve(engine) as client:
        alone = await create(client, tools=hosted)
        beside = await create(client, tools=[*hosted, WEATHER], tool_choice="required")
        forced = await create(
            client, tools=[*hosted, WEATHER], tool_choice={"type": "web_search_preview"}
        )
        required = await create(client, tools=hosted, tool_choice="required")
        # `auto` over hosted tools only: nothing to choose from, so no choice at all.
        auto = await create(client, tools=hosted, tool_choice="auto")
    assert alone.status_code == 200, alone.text
    assert auto.status_code == 200, auto.text
    assert "web_search" not in prompt_of(engine, 0)
    assert alone.json()["tools"][0] == WEB_SEARCH, "echoed as sent"
    assert beside.status_code == 200, beside.text
    assert "get_weather" in prompt_of(engine, 1)
    assert "code_interpreter" not in prompt_of(engine, 1)
    for refused, kind in ((forced, "web_search_preview"), (required, "code_interpreter")):
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["param"] == "tool_choice"
        assert f"'{kind}'" in error["message"]


async def test_allowed_tools_offers_only_those_named() -> None:
    engine = FakeEngine()
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [
            {"type": "namespace", "name": "multi_agent_v1"},
            {"type": "web_search"},
        ],
    }
    async with serve(engine) as client:
        reply = await create(
            client, tools=[AGENTS, APPLY_PATCH, WEATHER, WEB_SEARCH], tool_choice=choice
        )
        choice["tools"] = [{"type": "web_search"}]
        hosted_only = await create(client, tools=[WEATHER, WEB_SEARCH], tool_choice=choice)
    assert reply.status_code == 200, reply.text
    echoed = reply.json()["tool_choice"]
    assert (echoed["type"], echoed["mode"]) == ("allowed_tools", "required")
    prompt = prompt_of(engine)
    assert "multi_agent_v1.wait_agent" in prompt
    assert "get_weather" not in prompt
    assert "apply_patch" not in prompt
    structured = engine.calls[0].options.structured
    assert structured is not None
    assert structured.json_schema is not None
    names = [i["properties"]["name"]["const"] for i in structured.json_schema["items"]["anyOf"]]
    assert names == ["multi_agent_v1.spawn_agent", "multi_agent_v1.wait_agent"]
    assert hosted_only.status_code == 400
    assert hosted_only.json()["error"]["param"] == "tool_choice"
