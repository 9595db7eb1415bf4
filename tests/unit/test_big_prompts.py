"""Big prompts never stall the others: against a real uvicorn on 127.0.0.1.

A prompt is tokenized in proportion to its length (about a microsecond a byte with the
Hugging Face tokenizer: seconds for a few megabytes). The tokenizer here costs as much,
without the CPU: done on the event loop it would hold every running stream for seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine, FakeTokenizer
from oai_server.engine.protocol import Tokenizer
from oai_server.generation.offload import INLINE_CHARS
from oai_server.settings import Settings
from tests.live import serve_async
from tests.unit.conftest import MODEL, chat_body
from tests.unit.test_disconnect import validating_client

SECONDS_PER_BYTE = 2e-6
MAX_MODEL_LEN = 200_000
OVERSIZED = "lorem ipsum " * 250_000  # 3 MB: far past the context, under the 4 MiB body limit
LONG = "a long prompt that fits " * 6_000  # 144 kB: in the context, tokenized off the loop


class SlowTokenizer(FakeTokenizer):
    """The fake's byte tokens, at a real tokenizer's pace; it sleeps, as the Hugging Face
    tokenizer works in Rust, leaving the GIL to the event loop's thread. It notes each
    text's length and whether it was tokenized on the event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[tuple[int, bool]] = []

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        self.encoded.append((len(text), _on_event_loop()))
        time.sleep(len(text) * SECONDS_PER_BYTE)
        return super().encode(text, add_special_tokens=add_special_tokens)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a thread of the prompt pool
        return False
    return True


def chat(content: str, **fields: object) -> dict[str, object]:
    return chat_body(messages=[{"role": "user", "content": content}], **fields)


@dataclass
class SlowTokenizerEngine(FakeEngine):
    """The fake engine with one `SlowTokenizer`, as the real engine keeps one tokenizer."""

    slow: SlowTokenizer = field(default_factory=SlowTokenizer)

    @property
    def tokenizer(self) -> Tokenizer:
        return self.slow


async def test_streams_keep_flowing_while_big_prompts_arrive() -> None:
    engine = SlowTokenizerEngine(token_delay=0.02, reply="word " * 150, max_model_len=MAX_MODEL_LEN)
    oversized = [
        ("/v1/chat/completions", chat(OVERSIZED)),
        ("/v1/chat/completions", chat(OVERSIZED, max_tokens=16)),
        ("/v1/completions", {"model": MODEL, "prompt": OVERSIZED, "max_tokens": 16}),
    ]
    fitting = [
        ("/v1/chat/completions", chat(LONG, max_tokens=4)),
        ("/v1/completions", {"model": MODEL, "prompt": LONG, "max_tokens": 4}),
    ]
    bodies = [(path, json.dumps(body).encode()) for path, body in oversized + fitting]
    arrivals: list[float] = []
    first = asyncio.Event()

    async def stream(http: httpx.AsyncClient) -> None:
        body = chat_body(stream=True, max_tokens=150)
        async with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.monotonic())
                    first.set()

    headers = {"content-type": "application/json"}
    app = create_app(Settings(), engine)
    async with serve_async(app) as url, validating_client(url, timeout=60) as http:
        streaming = asyncio.create_task(stream(http))
        await first.wait()
        sent = (http.post(path, content=body, headers=headers) for path, body in bodies)
        answers = await asyncio.gather(*sent)
        await streaming
    for response in answers[: len(oversized)]:
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "context_length_exceeded"
    assert [r.status_code for r in answers[len(oversized) :]] == [200] * len(fitting)
    encoded = engine.slow.encoded
    assert [n for n, on_loop in encoded if on_loop and n > INLINE_CHARS] == []
    assert [n for n, _ in encoded if n >= len(OVERSIZED)] == [], "an oversized prompt tokenized"
    assert len([n for n, _ in encoded if n >= len(LONG)]) == len(fitting)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # Chunks come every 20 ms; a loaded CI machine may hold one for a while, never for the
    # seconds each oversized prompt would take to tokenize on the event loop.
    assert max(gaps) < 2.0, f"the stream stopped for {max(gaps):.2f} s"
    # The long prompts that fit reached the engine as the same tokens as ever.
    tokenizer = FakeTokenizer()
    chat_prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": LONG}], add_generation_prompt=True
    )
    prompts = [call.prompt_token_ids for call in engine.calls]
    assert tokenizer.encode(chat_prompt) in prompts
    assert tokenizer.encode(LONG) in prompts
    assert len(engine.calls) == 1 + len(fitting)
