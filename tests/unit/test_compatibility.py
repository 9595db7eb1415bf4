"""docs/api/compatibility.md, row by row: each row of its Chat and Messages sections is
sent here, by the OpenAI or the Anthropic SDK, and answered as the row says.

- accepted and ignored: 200, and the engine got the very prompt and options a request
  without the field gets;
- served: 200, and what the row says the server does with it is seen;
- refused: 400, naming the field.

The rows are read from the page: a row without a case here (or a case without a row)
fails `test_every_row_has_a_case`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.settings import Settings
from tests.live import serve

PAGE = Path(__file__).parents[2] / "docs" / "api" / "compatibility.md"
SECTIONS = ("Chat", "Messages")
MODEL = "smollm2-135m-instruct"
CONTEXT = 400
# Shows what reaches the template besides the turns: the thinking switch, the effort, and
# each turn's thinking.
TEMPLATE = (
    "[thinking={{ enable_thinking }} effort={{ reasoning_effort }}]"
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning_content %}[thought:{{ m.reasoning_content }}]{% endif %}"
    "{{ m.content }}\n{% endfor %}<|assistant|>"
)
HI = [{"role": "user", "content": "Hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def page_rows() -> set[tuple[str, str, str]]:
    """(section, field, status) of every row of the page's Chat and Messages tables."""
    rows: set[tuple[str, str, str]] = set()
    section = None
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif section in SECTIONS and line.startswith("| ") and not line.startswith("| field"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows.add((section, cells[0], cells[1]))
    return rows


@dataclass
class Sent:
    """What the server answered one case, and what the engine got."""

    body: Any
    fake: FakeEngine

    @property
    def prompt(self) -> str:
        return self.fake.tokenizer.decode(self.fake.calls[-1].prompt_token_ids)


@dataclass
class Case:
    """A request with the row's field, and what to see."""

    fields: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    # served: a check of the answer; refused: the field the error names.
    check: Callable[[Sent], None] | None = None
    param: str | None = None
    # Ignored: the request it must be answered as (default: the same without `fields`).
    baseline: dict[str, Any] = field(default_factory=dict)


def ignored(baseline: dict[str, Any] | None = None, **fields: Any) -> Case:
    return Case(fields, baseline=baseline or {})


def served(check: Callable[[Sent], None], **fields: Any) -> Case:
    return Case(fields, check=check)


def refused(param: str, **fields: Any) -> Case:
    return Case(fields, param=param)


def room_taken(finish: str) -> Callable[[Sent], None]:
    def check(sent: Sent) -> None:
        call = sent.fake.calls[-1]
        assert call.options.max_tokens == CONTEXT - len(call.prompt_token_ids)
        reason = sent.body.choices[0].finish_reason if finish == "length" else sent.body.stop_reason
        assert reason == finish

    return check


def shows(text: str) -> Callable[[Sent], None]:
    def check(sent: Sent) -> None:
        assert text in sent.prompt

    return check


def constrained(sent: Sent) -> None:
    structured = sent.fake.calls[-1].options.structured
    assert structured is not None
    assert structured.json_schema == SCHEMA


def standard_tier(sent: Sent) -> None:
    assert sent.fake.calls[-1].options.service_tier == "default"


def template_decides(sent: Sent) -> None:
    assert "[thinking= effort=]" in sent.prompt


THOUGHT_TURNS = [
    {"role": "user", "content": "one"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "first thought", "signature": "s"},
            {"type": "text", "text": "A"},
        ],
    },
    {"role": "user", "content": "two"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "second thought", "signature": "s"},
            {"type": "text", "text": "B"},
        ],
    },
    {"role": "user", "content": "three"},
]


def latest_thought_only(sent: Sent) -> None:
    assert "[thought:second thought]" in sent.prompt
    assert "first thought" not in sent.prompt


CHAT: dict[str, Case] = {
    "`max_tokens` past the context": served(room_taken("length"), max_tokens=32_000),
    "`max_completion_tokens` past the context": served(
        room_taken("length"), max_completion_tokens=32_000
    ),
    "`prediction`": ignored(prediction={"type": "content", "content": "Hello there"}),
    "`web_search_options`": ignored(web_search_options={"search_context_size": "low"}),
    "`verbosity`": ignored(verbosity="low"),
    "`safety_identifier`": ignored(safety_identifier="user-1234"),
    "`user`": ignored(user="user-1234"),
    "`prompt_cache_retention`": ignored(prompt_cache_retention="24h"),
    "`prompt_cache_options`": ignored(prompt_cache_options={"ttl": "24h"}),
    "`moderation`": ignored(moderation={"model": "omni-moderation-latest"}),
    "`stream_options.include_obfuscation`": ignored(stream_options={"include_obfuscation": True}),
    '`modalities` with `"audio"`': refused("modalities", modalities=["text", "audio"]),
    "`audio`": refused("audio", audio={"voice": "alloy", "format": "mp3"}),
    "`refusal` content parts": served(
        shows("<|assistant|>I can't help with that.\n<|user|>ok"),
        messages=[
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}],
            },
            {"role": "user", "content": "ok"},
        ],
    ),
    "`input_audio` and `file` content parts": refused(
        "messages[0].content",
        messages=[
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}],
            }
        ],
    ),
    "`functions`": refused("functions", functions=[{"name": "f", "parameters": {}}]),
    "`function_call`": refused("function_call", function_call="auto"),
}

MESSAGES: dict[str, Case] = {
    "`?beta=true`": Case(query={"beta": "true"}),
    "`anthropic-beta` header": Case(
        headers={"anthropic-beta": "interleaved-thinking-2025-05-14,context-management-2025-06-27"}
    ),
    "`max_tokens` past the context": served(room_taken("max_tokens"), max_tokens=32_000),
    "`max_tokens: 0`": refused("max_tokens", max_tokens=0),
    '`messages[].role: "system"`': served(
        shows("<|user|>Hi\n<|system|>cwd is /w\n"),
        messages=[*HI, {"role": "system", "content": "cwd is /w"}],
    ),
    '`thinking: {type: "adaptive"}`': served(template_decides, thinking={"type": "adaptive"}),
    '`thinking: {type: "between_tools"}`': served(
        template_decides, thinking={"type": "between_tools"}
    ),
    "`thinking.display`": ignored(
        {"thinking": {"type": "adaptive"}}, thinking={"type": "adaptive", "display": "omitted"}
    ),
    '`thinking: {type: "enabled", budget_tokens}`': served(
        shows("[thinking=True"),
        thinking={"type": "enabled", "budget_tokens": 1024},
        max_tokens=2048,
    ),
    "`output_config.effort`": served(shows("effort=high]"), output_config={"effort": "high"}),
    "`output_config.format`": served(
        constrained, output_config={"format": {"type": "json_schema", "schema": SCHEMA}}
    ),
    "`output_format`": served(constrained, output_format={"type": "json_schema", "schema": SCHEMA}),
    "`output_config.task_budget`": ignored(
        output_config={"task_budget": {"type": "tokens", "total": 50_000}}
    ),
    "`context_management` `clear_thinking_20251015`": served(
        latest_thought_only,
        messages=THOUGHT_TURNS,
        context_management={"edits": [{"type": "clear_thinking_20251015"}]},
    ),
    "`context_management` `clear_tool_uses_20250919`": ignored(
        context_management={
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 30_000},
                    "keep": {"type": "tool_uses", "value": 3},
                }
            ]
        }
    ),
    "`context_management` `compact_20260112`": ignored(
        context_management={"edits": [{"type": "compact_20260112"}]}
    ),
    "`compaction`": refused("compaction", compaction={"instructions": "Summarise."}),
    '`thread: {type: "continue"}`': refused(
        "thread", thread={"type": "continue", "previous_message_id": "msg_1"}
    ),
    '`thread: {type: "create"}`': ignored(thread={"type": "create"}),
    "`metadata.user_id`": ignored(metadata={"user_id": "user-1234"}),
    "`cache_control`": ignored(
        {"system": [{"type": "text", "text": "Be brief."}]},
        cache_control={"type": "ephemeral"},
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    ),
    "`container`": ignored(container="container_1"),
    "`mcp_servers`": ignored(
        mcp_servers=[{"type": "url", "url": "https://mcp.example.com/sse", "name": "example"}]
    ),
    "`speed`": ignored(speed="fast"),
    "`inference_geo`": ignored(inference_geo="us"),
    '`service_tier: "standard_only"`': served(standard_tier, service_tier="standard_only"),
    "`diagnostics`": ignored(diagnostics={"previous_message_id": "msg_1"}),
    "`fallbacks`": ignored(fallbacks="default"),
    "`fallback_credit_token`": ignored(fallback_credit_token="token"),
    "`billing_policy`": ignored(billing_policy={"type": "billing_policy", "bill_to": "self"}),
    "`workspace_id`": ignored(workspace_id="wrkspc_1"),
    "`user_profile_id`": ignored(user_profile_id="profile_1"),
    "`redacted_thinking` blocks": ignored(
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "Hi"}]},
        messages=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "opaque"}]},
            {"role": "user", "content": "Hi"},
        ],
    ),
    "`document` blocks of text": served(
        shows("Notes\n\nThe meeting is at noon.\nBring a pen."),
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "title": "Notes",
                        "source": {
                            "type": "text",
                            "media_type": "text/plain",
                            "data": "The meeting is at noon.",
                        },
                    },
                    {
                        "type": "document",
                        "source": {
                            "type": "content",
                            "content": [{"type": "text", "text": "Bring a pen."}],
                        },
                    },
                ],
            }
        ],
    ),
    "`document` blocks of a PDF": refused(
        "document",
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBERi0=",
                        },
                    }
                ],
            }
        ],
    ),
    "`search_result` blocks": served(
        shows("Weather\n\nhttps://example.com/w\n\nSunny in Paris."),
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {
                                "type": "search_result",
                                "source": "https://example.com/w",
                                "title": "Weather",
                                "content": [{"type": "text", "text": "Sunny in Paris."}],
                            }
                        ],
                    }
                ],
            },
        ],
    ),
}
CASES = {"Chat": CHAT, "Messages": MESSAGES}


def _status(case: Case) -> str:
    if case.param is not None:
        return "refused"
    return "accepted and ignored" if case.check is None else "served"


def test_every_row_has_a_case() -> None:
    rows = page_rows()
    cases = {
        (section, name, _status(case))
        for section, table in CASES.items()
        for name, case in table.items()
    }
    assert rows == cases


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeEngine]]:
    fake = FakeEngine(max_model_len=CONTEXT, tokens=["go "] * 1000, chat_template=TEMPLATE)
    with serve(create_app(Settings(), fake)) as root:
        yield root, fake


@pytest.fixture(scope="module")
def sdks(
    server: tuple[str, FakeEngine],
) -> Iterator[tuple[openai.OpenAI, anthropic.Anthropic]]:
    root = server[0]
    with (
        openai.OpenAI(base_url=f"{root}/v1", api_key="k", max_retries=0) as oai,
        anthropic.Anthropic(base_url=root, api_key="k", max_retries=0, timeout=30) as claude,
    ):
        yield oai, claude


def _send(
    sdks: tuple[openai.OpenAI, anthropic.Anthropic],
    section: str,
    fields: dict[str, Any],
    case: Case,
) -> Any:
    """The request, its fields sent as the SDK sends fields it has no argument for."""
    oai, claude = sdks
    extra: dict[str, Any] = {
        "extra_body": fields,
        "extra_headers": case.headers,
        "extra_query": case.query,
    }
    if section == "Chat":
        return oai.chat.completions.create(model=MODEL, messages=HI, max_tokens=4, **extra)  # type: ignore[arg-type]
    return claude.messages.create(model=MODEL, messages=HI, max_tokens=4, **extra)  # type: ignore[arg-type]


def _case_ids() -> list[tuple[str, str]]:
    return [(section, name) for section, table in CASES.items() for name in table]


@pytest.mark.parametrize(("section", "name"), _case_ids())
def test_row(
    server: tuple[str, FakeEngine],
    sdks: tuple[openai.OpenAI, anthropic.Anthropic],
    section: str,
    name: str,
) -> None:
    fake = server[1]
    case = CASES[section][name]
    if case.param is not None:
        errors = (openai.BadRequestError, anthropic.BadRequestError)
        before = len(fake.calls)
        with pytest.raises(errors) as refusal:
            _send(sdks, section, case.fields, case)
        assert len(fake.calls) == before
        if isinstance(refusal.value, openai.BadRequestError):
            assert isinstance(refusal.value.body, dict)
            assert refusal.value.body["param"] == case.param
        else:
            # Anthropic's errors carry no `param`: the message names the field.
            assert re.search(re.escape(case.param), refusal.value.message, re.IGNORECASE)
        return
    body = _send(sdks, section, case.fields, case)
    if case.check is not None:
        case.check(Sent(body, fake))
        return
    got = fake.calls[-1]
    _send(sdks, section, case.baseline, Case())
    baseline = fake.calls[-1]
    assert got.prompt_token_ids == baseline.prompt_token_ids
    assert got.options == baseline.options
