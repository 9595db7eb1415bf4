"""docs/api/compatibility.md's Responses section, row by row: each field is answered 200
and does what the row says; then all of them in one request, as Codex sends several.

Served by a thinking model (vLLM's DeepSeek-R1 parser on the fake engine), so every answer
has a reasoning item before its message, and with a store, so `store` can be seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.engine.types import SamplingOptions
from tests.conformance import validating_client
from tests.live import serve
from tests.responses.test_logprobs import ScoringEngine
from tests.responses.test_reasoning import app, pieces
from tests.store.conftest import MODEL
from tests.unit.test_reasoning import THINK

TEXT = "I think</think>It is sunny."
# Shows what the template is given: each turn's thinking, and the reasoning effort.
TEMPLATE = (
    "[effort:{{ reasoning_effort }}]{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.reasoning_content %}[thought:{{ m.reasoning_content }}]{% endif %}"
    "{{ m.content }}\n{% endfor %}<|assistant|>"
)


@dataclass
class Served:
    """One row's answer: the response's JSON, the engine's last request, the server."""

    body: dict[str, Any]
    prompt: str
    options: SamplingOptions
    http: httpx.Client


Check = Callable[[Served], None]


def _reasoning(served: Served) -> dict[str, Any]:
    item: dict[str, Any] = served.body["output"][0]
    assert item["type"] == "reasoning"
    return item


def _message_part(served: Served) -> dict[str, Any]:
    part: dict[str, Any] = served.body["output"][1]["content"][0]
    return part


def _no_summary(served: Served) -> None:
    item = _reasoning(served)
    assert item["summary"] == []
    assert item["content"] == [{"type": "reasoning_text", "text": "I think"}]
    assert served.body["reasoning"]["summary"] is None


def _echoed(field: str, value: object) -> Check:
    def check(served: Served) -> None:
        assert served.body[field] == value

    return check


def _sealed(served: Served) -> None:
    sealed = _reasoning(served)["encrypted_content"]
    assert sealed
    assert "I think" not in sealed


def _logprobs(count: int) -> Check:
    def check(served: Served) -> None:
        logprobs = _message_part(served)["logprobs"]
        assert logprobs
        assert all(len(p["top_logprobs"]) == count for p in logprobs)

    return check


def _effort(served: Served) -> None:
    assert served.body["reasoning"]["effort"] == "low"
    assert served.prompt.startswith("[effort:low]")


def _not_stored(served: Served) -> None:
    assert served.http.get(f"/v1/responses/{served.body['id']}").status_code == 404


def _stored(served: Served) -> None:
    assert served.http.get(f"/v1/responses/{served.body['id']}").status_code == 200


def _penalties(served: Served) -> None:
    assert (served.options.presence_penalty, served.options.frequency_penalty) == (0.5, -0.5)
    assert (served.body["presence_penalty"], served.body["frequency_penalty"]) == (0.5, -0.5)


def _verbosity(served: Served) -> None:
    assert served.body["text"] == {"format": {"type": "text"}, "verbosity": "low"}


def _nothing_more(served: Served) -> None:
    """Accepted and not acted on: the answer is the plain one (no item, no field added)."""
    assert [o["type"] for o in served.body["output"]] == ["reasoning", "message"]
    assert "encrypted_content" not in _reasoning(served)
    assert "moderation" not in served.body


def _background(served: Served) -> None:
    assert served.body["background"] is True
    assert served.body["status"] in ("queued", "in_progress", "completed")


HARMLESS = [
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "message.input_image.image_url",
]

# One per row of the section, in its order: the fields sent, what is then seen.
ROWS: dict[str, tuple[dict[str, Any], Check]] = {
    "reasoning.effort": ({"reasoning": {"effort": "low"}}, _effort),
    "reasoning.summary": ({"reasoning": {"summary": "auto"}}, _no_summary),
    "reasoning.generate_summary": ({"reasoning": {"generate_summary": "concise"}}, _no_summary),
    "reasoning.context": ({"reasoning": {"context": "all_turns"}}, _nothing_more),
    "include reasoning.encrypted_content": (
        {"include": ["reasoning.encrypted_content"], "store": False},
        _sealed,
    ),
    "include message.output_text.logprobs": (
        {"include": ["message.output_text.logprobs"]},
        _logprobs(0),
    ),
    "include (built-in tools, input images)": ({"include": HARMLESS}, _nothing_more),
    "store false": ({"store": False}, _not_stored),
    "store true": ({"store": True}, _stored),
    "prompt_cache_key": (
        {"prompt_cache_key": "codex-session-1"},
        _echoed("prompt_cache_key", "codex-session-1"),
    ),
    "prompt_cache_retention": (
        {"prompt_cache_retention": "24h"},
        _echoed("prompt_cache_retention", "24h"),
    ),
    "prompt_cache_options": ({"prompt_cache_options": {"ttl": "30m"}}, _nothing_more),
    "client_metadata": ({"client_metadata": {"x-codex-turn": "1"}}, _nothing_more),
    "safety_identifier": ({"safety_identifier": "user-7"}, _echoed("safety_identifier", "user-7")),
    "user": ({"user": "user-7"}, _echoed("user", "user-7")),
    "max_tool_calls": ({"max_tool_calls": 3}, _echoed("max_tool_calls", 3)),
    "text.verbosity": ({"text": {"verbosity": "low"}}, _verbosity),
    "top_logprobs": ({"top_logprobs": 2}, _logprobs(2)),
    "service_tier": ({"service_tier": "flex"}, _echoed("service_tier", "default")),
    "truncation": ({"truncation": "auto"}, _echoed("truncation", "auto")),
    "background": ({"background": True}, _background),
    "moderation": ({"moderation": {"model": "omni-moderation-latest"}}, _nothing_more),
    "context_management": (
        {"context_management": [{"type": "compaction", "compact_threshold": 1000}]},
        _nothing_more,
    ),
    "presence_penalty, frequency_penalty": (
        {"presence_penalty": 0.5, "frequency_penalty": -0.5},
        _penalties,
    ),
}
# The Response fields the spec has, sent null when the request did not set them
# (`top_logprobs` is 0 then: Open Responses has it an integer, never null).
ECHOED_NULL = [
    "max_tool_calls",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, FakeEngine]]:
    tmp = tmp_path_factory.mktemp("compat")
    fake = ScoringEngine(tokens=pieces(TEXT), added_tokens=THINK, chat_template=TEMPLATE)
    store = f"sqlite:///{tmp / 'store.db'}"
    with (
        serve(app(fake, store_url=store, data_dir=tmp)) as base,
        validating_client(base_url=base, timeout=30) as http,
    ):
        yield http, fake


def _send(server: tuple[httpx.Client, FakeEngine], fields: dict[str, Any]) -> Served:
    http, fake = server
    answer = http.post("/v1/responses", json={"model": MODEL, "input": "Weather?", **fields})
    assert answer.status_code == 200, answer.text
    call = fake.calls[-1]
    prompt = fake.tokenizer.decode(call.prompt_token_ids)
    return Served(answer.json(), prompt, call.options, http)


@pytest.mark.parametrize("row", list(ROWS))
def test_each_row_is_answered_as_the_docs_say(
    server: tuple[httpx.Client, FakeEngine], row: str
) -> None:
    fields, check = ROWS[row]
    check(_send(server, fields))


# Rows whose fields cannot join the others (background needs `store: true`), and checks
# that another row's field changes (logprobs' count, what "nothing more" looks for).
NOT_AT_ONCE = {"store true", "background"}
CHECKED_ALONE = {"include message.output_text.logprobs"}


def test_every_row_at_once(server: tuple[httpx.Client, FakeEngine]) -> None:
    fields: dict[str, Any] = {"include": [], "reasoning": {}}
    for name, (sent, _) in ROWS.items():
        if name in NOT_AT_ONCE:
            continue
        for field, value in sent.items():
            if field == "include":
                fields["include"] += value
            elif field == "reasoning":
                fields["reasoning"].update(value)
            else:
                fields[field] = value
    served = _send(server, fields)
    for name, (_, check) in ROWS.items():
        if name not in NOT_AT_ONCE | CHECKED_ALONE and check is not _nothing_more:
            check(served)


def test_what_was_not_set_is_echoed_as_null(server: tuple[httpx.Client, FakeEngine]) -> None:
    body = _send(server, {}).body
    assert {field: body[field] for field in ECHOED_NULL} == dict.fromkeys(ECHOED_NULL)
    assert body["reasoning"] is None
    assert body["top_logprobs"] == 0
    assert (body["presence_penalty"], body["frequency_penalty"]) == (0.0, 0.0)
