"""Sampling fields the real engine must honour, each shown by a change a user would notice.

A field the server dropped on its way to vLLM would leave the answer as it was: every
test compares with the greedy answer to the same prompt, so it fails if the field is
lost. Calls are few and short (at most 24 tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration

STORY = "Once upon a time"
# Greedily continued with " 1 1 1 1"; any of the penalties turns it elsewhere.
REPEATED = "1 1 1 1 1 1 1 1"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    transport = ValidatingTransport()
    with httpx.Client(base_url=server.root, transport=transport, timeout=SDK_TIMEOUT_S) as c:
        yield c


def complete(http: httpx.Client, prompt: str, **fields: Any) -> dict[str, Any]:
    """The one choice of a greedy, 8-token completion of `prompt`, with `fields` on top."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 8, "temperature": 0, **fields}
    response = http.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    choice: dict[str, Any] = response.json()["choices"][0]
    return choice


def token_ids(http: httpx.Client, text: str) -> list[int]:
    body = {"model": MODEL, "prompt": text, "add_special_tokens": False}
    tokens: list[int] = http.post("/tokenize", json=body).json()["tokens"]
    return tokens


def test_stop_string_ends_a_streamed_chat_and_is_named(http: httpx.Client) -> None:
    body = {"model": MODEL, "messages": QUESTION, "max_tokens": 16, "temperature": 0}
    whole = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
    stop = whole[len(whole) // 2 : len(whole) // 2 + 3]
    assert len(stop) == 3, whole
    with http.stream(
        "POST", "/v1/chat/completions", json={**body, "stop": [stop], "stream": True}
    ) as r:
        chunks = [
            line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data: {")
        ]
    choices = [c for chunk in map(json.loads, chunks) for c in chunk["choices"]]
    text = "".join(c["delta"].get("content") or "" for c in choices)
    assert text == whole[: whole.find(stop)]
    assert (choices[-1]["finish_reason"], choices[-1]["stop_reason"]) == ("stop", stop)


def test_logit_bias_and_stop_token_ids_act_on_the_tokens_the_model_says(
    http: httpx.Client,
) -> None:
    greedy = complete(http, STORY, max_tokens=4, logprobs=0)
    said = greedy["logprobs"]["tokens"]
    ids = token_ids(http, greedy["text"])
    assert (
        http.post("/detokenize", json={"model": MODEL, "tokens": ids[:1]}).json()["prompt"]
        == said[0]
    )
    # Banning the first token the model would say makes it say something else.
    banned = complete(http, STORY, max_tokens=4, logprobs=0, logit_bias={str(ids[0]): -100})
    assert banned["logprobs"]["tokens"][0] != said[0]
    # A stop token id ends the answer there, and is named.
    stopped = complete(http, STORY, max_tokens=4, stop_token_ids=[ids[1]])
    assert (stopped["text"], stopped["finish_reason"]) == (said[0], "stop")
    assert stopped["stop_reason"] == ids[1]


@pytest.mark.parametrize(
    "penalty", [{"frequency_penalty": 2.0}, {"presence_penalty": 2.0}, {"repetition_penalty": 2.0}]
)
def test_penalties_change_a_repetitive_answer(
    http: httpx.Client, penalty: dict[str, float]
) -> None:
    greedy = complete(http, REPEATED)["text"]
    assert complete(http, REPEATED, **penalty)["text"] != greedy


def test_top_k_and_min_p_are_applied(http: httpx.Client) -> None:
    greedy = complete(http, STORY)["text"]
    hot = {"temperature": 2.0, "seed": 7}
    # At temperature 2 a seeded sample wanders from the greedy answer...
    assert complete(http, STORY, **hot)["text"] != greedy
    # ...unless only the most likely token is left to sample from.
    assert complete(http, STORY, **hot, top_k=1)["text"] == greedy
    assert complete(http, STORY, **hot, min_p=1.0)["text"] == greedy


def test_skip_special_tokens(http: httpx.Client) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 24,
        "temperature": 0,
        "ignore_eos": True,
    }
    shown = http.post("/v1/chat/completions", json={**body, "skip_special_tokens": False})
    hidden = http.post("/v1/chat/completions", json=body)
    assert "<|im_end|>" in shown.json()["choices"][0]["message"]["content"]
    assert "<|im_end|>" not in hidden.json()["choices"][0]["message"]["content"]
