"""A DeepSeek-R1-style model served as a thinking model without `--reasoning-parser`, on
the real engine.

The embedded model's weights served from a directory made to look like an R1 distill:
two unused special tokens (`<jupyter_script>`, `<empty_output>`) renamed `<think>` and
`</think>`, and R1's rule in the chat template (an earlier answer keeps only what follows
`</think>`); the generation prompt does not open `<think>` (this small model would stop at
once). No family's markers: the server recognises a generic thinking model of R1's
lineage and reads it with `deepseek_r1`, as a new user would want it read with no flag.
It never writes `</think>`, so, as `vllm serve --reasoning-parser deepseek_r1` answers
it, all it writes is thinking, here with its tokens counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings
from tests.conformance import ValidatingTransport
from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server, run_server

pytestmark = pytest.mark.integration

RENAMED = {"<jupyter_script>": "<think>", "<empty_output>": "</think>"}
R1_TEMPLATE = (
    "{% for message in messages %}{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def _renamed(text: str) -> str:
    for old, new in RENAMED.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    return text


@pytest.fixture(scope="module")
def r1_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = ensure_embedded_model(Settings().cache_dir)
    target = tmp_path_factory.mktemp("r1-model")
    rewritten = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
    for path in source.iterdir():
        if path.name not in rewritten:
            (target / path.name).symlink_to(path)
    for name in rewritten[:2]:
        (target / name).write_text(_renamed((source / name).read_text()))
    config = json.loads((target / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    (target / "chat_template.jinja").write_text(R1_TEMPLATE)
    return target


@pytest.fixture(scope="module")
def r1_server(r1_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    flags = ("--model", str(r1_model), "--served-model-name", MODEL, "--max-model-len", "2048")
    with run_server(tmp_path_factory.mktemp("r1"), *flags) as running:
        yield running


def post(server: Server, **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": QUESTION, "max_tokens": 8, "temperature": 0, **fields}
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        response = http.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return response


def test_the_ready_line_names_the_parser_chosen(r1_server: Server) -> None:
    assert f"{MODEL}: tool calls: hermes (built-in), reasoning: deepseek_r1 (generic-think)" in (
        r1_server.log.read_text()
    )


def test_an_r1_distill_answers_as_reasoning(r1_server: Server) -> None:
    whole = post(r1_server).json()
    message = whole["choices"][0]["message"]
    assert message["reasoning"].strip()
    assert message["content"] is None
    usage = whole["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == usage["completion_tokens"]

    streamed = post(r1_server, stream=True, stream_options={"include_usage": True})
    lines = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    chunks = [json.loads(line) for line in lines[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning") or "" for d in deltas) == message["reasoning"]
    assert not any(d.get("content") for d in deltas)
    assert chunks[-1]["usage"] == usage


def test_responses_and_messages_carry_the_thinking_apart(r1_server: Server) -> None:
    with httpx.Client(transport=ValidatingTransport(), timeout=SDK_TIMEOUT_S) as http:
        response = http.post(
            f"{r1_server.base_url}/responses",
            json={"model": MODEL, "input": QUESTION, "max_output_tokens": 8, "temperature": 0},
        )
        message = http.post(
            f"{r1_server.base_url}/messages",
            json={"model": MODEL, "messages": QUESTION, "max_tokens": 8, "temperature": 0},
        )
    assert response.status_code == 200, response.text
    (thought,) = response.json()["output"]  # all thinking: no message item
    assert thought["type"] == "reasoning"
    assert thought["content"][0]["type"] == "reasoning_text"
    assert thought["content"][0]["text"].strip()
    usage = response.json()["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == usage["output_tokens"] > 0

    assert message.status_code == 200, message.text
    (block,) = message.json()["content"]
    assert block["type"] == "thinking"
    assert block["thinking"] == thought["content"][0]["text"]  # greedy: the same thinking
    assert block["signature"]
    assert message.json()["usage"]["output_tokens"] == usage["output_tokens"]
