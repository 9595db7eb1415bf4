"""`python -m benchmarks.tool_parsing`: the server's CPU time per streamed chunk with one of
vLLM's tool-call parsers reading the answer, against plain text, in one run.

In-process (the app over httpx's ASGI transport, the fake engine: tokens cost nothing), so
what differs between the cases is the parser's work: the same 256-token answer streamed as
plain text without tools, as content read by a parser (tools given, no call made), and as
one long call. Each case runs in turn, `--rounds` times, and the ratios of one run are
what to compare (the machine is shared). `--tokens 1024` shows how a parser's cost per
chunk grows with the answer (vLLM's streaming parsers re-read the text so far).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.engine.vllm.holder import VLLMTokenizer
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    }
]
# (case, tool-call parser, special tokens, template marker, what the answer is)
CASES: list[tuple[str, str | None, tuple[str, ...], str, str]] = [
    ("plain text", None, (), "", "text"),
    ("hermes, content", "hermes", ("<tool_call>", "</tool_call>"), "<tool_call>", "text"),
    ("hermes, one call", "hermes", ("<tool_call>", "</tool_call>"), "<tool_call>", "hermes"),
    (
        "llama3_json, one call",
        "llama3_json",
        ("<|python_tag|>", "<|eom_id|>", "<|start_header_id|>"),
        "<|start_header_id|><|eom_id|>",
        "llama",
    ),
]


def _tokenizer(tokens: tuple[str, ...], marker: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        ensure_embedded_model(Path.home() / ".cache" / "oai-server", "float32")
    )
    if tokens:
        tokenizer.add_special_tokens({"additional_special_tokens": list(tokens)})
    tokenizer.chat_template = (
        "{#- " + marker + " -#}{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
        "{% endfor %}assistant: "
    )
    return tokenizer


def _pieces(kind: str, count: int) -> list[str]:
    words = [f" w{i % 10}" for i in range(count)]
    if kind == "text":
        return words
    body = json.dumps({"text": "".join(words)})  # stands in for a call's long arguments
    pieces = [body[i : i + 4] for i in range(0, len(body), 4)][: count - 8]
    if kind == "hermes":
        return ["<tool_call>", '{"name": "write", "arguments": ', *pieces, "}", "</tool_call>"]
    return ['{"name": "write", "parameters": ', *pieces, "}"]


async def _measure(
    case: tuple[str, str | None, tuple[str, ...], str, str], tokens: int, requests: int
) -> float:
    _, parser, special, marker, kind = case
    engine = FakeEngine(
        tokens=_pieces(kind, tokens),
        model_tokenizer=VLLMTokenizer(_tokenizer(special, marker)),
    )
    app = create_app(Settings(tool_call_parser=parser or "auto", web_ui=False), engine)
    body: dict[str, Any] = {
        "model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
    }
    if parser is not None:
        body["tools"] = TOOLS
    async with app.router.lifespan_context(app):
        await asyncio.sleep(0.2)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await client.post("/v1/chat/completions", json=body)  # warm-up
            chunks = 0
            began = time.process_time()
            for _ in range(requests):
                reply = await client.post("/v1/chat/completions", json=body)
                chunks += reply.text.count("data: {")
            return (time.process_time() - began) / chunks * 1e6


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    results: dict[str, list[float]] = {case[0]: [] for case in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            results[case[0]].append(await _measure(case, args.tokens, args.requests))
    plain = min(results["plain text"])
    print(f"{args.tokens}-token answers, {args.requests} requests x {args.rounds} rounds")
    for name, values in results.items():
        best = min(values)
        print(f"  {name:24s} {best:8.1f} us CPU per chunk  {best / plain:5.2f}x plain text")


if __name__ == "__main__":
    asyncio.run(main())
