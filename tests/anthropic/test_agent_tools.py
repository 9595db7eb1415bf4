"""Claude Code's tools on `/v1/messages`: its `Bash` schema passes, a compiled one is still
bounded, and Anthropic's own tools (server tools, schema-less client tools) are accepted
and not offered to the model."""

from __future__ import annotations

from typing import Any

import httpx

from oai_server.engine.fake import FakeEngine
from tests.anthropic.conftest import MODEL, server
from tests.unit.test_agent_tool_schemas import ABSURD, BASH_SCHEMA
from tests.unit.test_custom_tools import prompt_of

BASH = {"name": "Bash", "description": "Run a command.", "input_schema": BASH_SCHEMA}
ANTHROPIC_OWN = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "bash_20250124", "name": "bash"},
]


def post(root: str, **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
    return httpx.post(f"{root}/v1/messages?beta=true", json={**body, **fields})


def test_claude_codes_tool_passes_and_a_forced_absurd_bound_does_not() -> None:
    engine = FakeEngine()
    absurd = {"name": "Bash", "input_schema": ABSURD}
    with server(engine) as root:
        shown = post(root, tools=[BASH])
        forced = post(root, tools=[absurd], tool_choice={"type": "tool", "name": "Bash"})
    assert shown.status_code == 200, shown.text
    assert '"maxLength": 524288' in prompt_of(engine)
    assert forced.status_code == 400
    assert forced.json()["error"]["message"].startswith(
        "Invalid schema at 'tools[0].function.parameters.properties.xs.maxLength'"
    )


def test_anthropics_own_tools_are_accepted_and_not_offered() -> None:
    engine = FakeEngine()
    with server(engine) as root:
        alone = post(root, tools=ANTHROPIC_OWN)
        beside = post(root, tools=[*ANTHROPIC_OWN, BASH], tool_choice={"type": "any"})
        forced = post(
            root, tools=[*ANTHROPIC_OWN, BASH], tool_choice={"type": "tool", "name": "web_search"}
        )
        any_own = post(root, tools=ANTHROPIC_OWN, tool_choice={"type": "any"})
        no_schema = post(root, tools=[{"name": "Read"}])
        # `auto` over Anthropic's own tools only: nothing to choose from, so no choice.
        auto = post(root, tools=ANTHROPIC_OWN, tool_choice={"type": "auto"})
    assert alone.status_code == 200, alone.text
    assert auto.status_code == 200, auto.text
    assert "web_search" not in prompt_of(engine, 0)
    assert beside.status_code == 200, beside.text
    assert '"Bash"' in prompt_of(engine, 1)
    assert "code_execution" not in prompt_of(engine, 1)
    for refused in (forced, any_own):
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert "'web_search_20250305'" in error["message"]
    assert no_schema.status_code == 400
    assert "input_schema" in no_schema.json()["error"]["message"]
