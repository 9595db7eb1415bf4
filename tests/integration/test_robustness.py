"""Bad input, client walk-outs and health, against the real server and engine."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, Server
from tests.unit.hostile_corpus import ALL_CASES

pytestmark = pytest.mark.integration

HI = [{"role": "user", "content": "Hi"}]
# A request that would run for minutes if nobody stopped it.
ENDLESS = {"model": MODEL, "messages": HI, "max_tokens": 1800, "ignore_eos": True}


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.root, transport=ValidatingTransport(), timeout=60) as c:
        yield c


BAD_REQUESTS: list[tuple[str, Any, int, str | None]] = [
    ("/v1/chat/completions", {"model": MODEL}, 400, "messages"),
    ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
    (
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]},
        400,
        None,
    ),
    (
        "/v1/chat/completions",
        {"model": MODEL, "messages": HI, "temperature": "hot"},
        400,
        "temperature",
    ),
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "max_tokens": -1}, 400, "max_tokens"),
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "n": 0}, 400, "n"),
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "top_p": 1.5}, 400, "top_p"),
    ("/v1/chat/completions", {"model": "gpt-4o", "messages": HI}, 404, "model"),
    (
        "/v1/chat/completions",
        {"model": MODEL, "messages": HI, "top_logprobs": 2},
        400,
        "top_logprobs",
    ),
    (
        "/v1/chat/completions",
        {"model": MODEL, "messages": HI, "response_format": {"type": "json_schema"}},
        400,
        "response_format.json_schema.schema",
    ),
    (
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ],
        },
        400,
        "messages[0].content[0]",
    ),
    ("/v1/completions", {"model": MODEL, "prompt": [999_999_999]}, 400, None),
    ("/v1/completions", {"model": MODEL, "prompt": "x", "suffix": "y"}, 400, "suffix"),
    ("/v1/completions", {"model": MODEL, "prompt": "x", "n": 3, "best_of": 2}, 400, "best_of"),
    ("/detokenize", {"tokens": [10**6]}, 400, "tokens"),
    (
        "/v1/chat/completions",
        {"model": MODEL, "messages": HI, "tool_choice": "required"},
        400,
        "tool_choice",
    ),
    *(
        ("/v1/chat/completions", {"model": MODEL, "messages": HI, name: value}, 400, name)
        for name, value in [
            ("audio", {"voice": "alloy", "format": "mp3"}),
            ("function_call", "auto"),
        ]
    ),
]

# From the hostile corpus, the requests whose harm was inside the engine: the schema that
# once made the server run out of memory, numbers that overflowed there, a batch that held
# it for minutes. Streamed or not, each is refused before the engine sees it.
ENGINE_HOSTILE = [
    case
    for case in ALL_CASES
    if case.name.removesuffix("-stream")
    in {
        "minItems-1e9",
        "minItems-1e9-completions",
        "tool-minItems-1e9",
        "ref-bomb",
        "chat-seed=18446744073709551616",
        "completions-top_k=1000000000000000000000000000000",
        "prompts-2000",
        "prompt-out-of-vocab",
        "logit_bias-key-out-of-vocab",
    }
]


def test_hostile_corpus_against_the_real_engine(server: Server, http: httpx.Client) -> None:
    assert len(ENGINE_HOSTILE) == 18
    for case in ENGINE_HOSTILE:
        response = http.post(
            case.path, content=case.body, headers={"content-type": "application/json"}
        )
        assert response.status_code == case.status, (case.name, response.text)
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert case.param is None or error["param"] == case.param, (case.name, error)
    # A bounded schema of the same shape still decodes, on the real grammar compiler.
    bounded = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}
    reply = http.post(
        "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "Three numbers, please."}],
            "max_tokens": 24,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": bounded},
            },
        },
    )
    assert reply.status_code == 200, reply.text
    numbers = json.loads(reply.json()["choices"][0]["message"]["content"])
    assert 2 <= len(numbers) <= 3
    assert all(isinstance(n, int) for n in numbers)
    # Nothing was left running, and nothing died.
    assert _wait_idle(server, 5) < 5


@pytest.mark.parametrize(("path", "body", "status", "param"), BAD_REQUESTS)
def test_bad_request_gets_openai_error(
    http: httpx.Client, path: str, body: Any, status: int, param: str | None
) -> None:
    for stream in (False, True):
        reply = http.post(path, json={**body, "stream": stream})
        assert reply.status_code == status, reply.text
        error = reply.json()["error"]
        assert error["message"]
        assert error["code"] is None or isinstance(error["code"], str)
        if param is not None:
            assert error["param"] == param
        assert "Traceback" not in reply.text
    assert http.get("/health").status_code == 200


def test_max_tokens_past_the_context_answers_to_its_end(http: httpx.Client) -> None:
    """Agents ask for 32,000 tokens whatever the context: the answer runs to the end of
    it and stops for length. A prompt of nearly the whole context keeps the run short."""
    context = http.get("/v1/models").json()["data"][0]["max_model_len"]
    words = [{"role": "user", "content": "word " * (context - 60)}]
    body = {"model": MODEL, "messages": words, "max_tokens": 32_000, "ignore_eos": True}
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["finish_reason"] == "length"
    usage = reply.json()["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == context
    assert 0 < usage["completion_tokens"] < 60


def test_a_prompt_past_the_context_is_refused(http: httpx.Client) -> None:
    context = http.get("/v1/models").json()["data"][0]["max_model_len"]
    words = [{"role": "user", "content": "word " * context}]
    reply = http.post("/v1/chat/completions", json={"model": MODEL, "messages": words})
    assert reply.json()["error"]["code"] == "context_length_exceeded"


def test_malformed_json_and_unknown_route(http: httpx.Client) -> None:
    reply = http.post(
        "/v1/chat/completions", content=b"{oops", headers={"content-type": "application/json"}
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert http.get("/v1/engines").status_code == 404
    assert http.get("/version").json()["version"]


def _wait_idle(server: Server, within_s: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < within_s:
        if server.running_requests() == 0:
            return time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"engine still running {server.running_requests()} request(s)")


def test_client_leaving_mid_stream_aborts_engine_request(
    server: Server, http: httpx.Client
) -> None:
    _wait_idle(server, 30)
    with http.stream("POST", "/v1/chat/completions", json={**ENDLESS, "stream": True}) as reply:
        assert reply.status_code == 200
        events = reply.iter_lines()
        seen = [line for _, line in zip(range(6), events, strict=False) if line]
        assert seen
        assert server.running_requests() == 1
    # 1800 tokens take minutes here; an abort frees the engine in well under 5 s.
    assert _wait_idle(server, 5) < 5


def test_client_leaving_before_non_streamed_answer_aborts(server: Server) -> None:
    _wait_idle(server, 30)
    with (
        httpx.Client(
            base_url=server.root, transport=ValidatingTransport(), timeout=1.5
        ) as impatient,
        pytest.raises(httpx.ReadTimeout),
    ):
        impatient.post("/v1/chat/completions", json=ENDLESS)
    assert _wait_idle(server, 5) < 5


def test_server_serves_after_all_that(http: httpx.Client) -> None:
    reply = http.post(
        "/v1/chat/completions", json={"model": MODEL, "messages": HI, "max_tokens": 4}
    )
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"]
