"""The bound on a prompt's tokens that refuses it untokenized: never above the real count,
and known from the moment the server says it is ready."""

from __future__ import annotations

import random

from oai_server.engine.fake import FakeEngine, FakeTokenizer
from oai_server.engine.protocol import Tokenizer
from oai_server.engine.token_bytes import longest_token_bytes
from oai_server.generation.prompt_bound import tokens_at_least
from tests.unit.conftest import MODEL, serve


class CountingTokenizer(FakeTokenizer):
    """The fake's tokenizer, noting the length of every text it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[int] = []

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        self.encoded.append(len(text))
        return super().encode(text, add_special_tokens=add_special_tokens)


class LowerCasingTokenizer(FakeTokenizer):
    """Folds case, as BERT's WordPiece does: its tokens do not spell the text out again."""

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return super().encode(text.lower(), add_special_tokens=add_special_tokens)


class OneTokenizerEngine(FakeEngine):
    """The fake engine keeping one tokenizer, as the real engine does."""

    def __init__(self, tokenizer: Tokenizer, **fields: object) -> None:
        super().__init__(**fields)  # type: ignore[arg-type]
        self.one = tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        return self.one


def test_the_bound_never_passes_the_real_count() -> None:
    tokenizer = FakeTokenizer()
    rng = random.Random(7)
    alphabet = "ab \n\t.é中😀"
    longest = longest_token_bytes(tokenizer, 256)
    assert longest is not None
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400)))
        assert tokens_at_least(text, longest, 1) <= len(tokenizer.encode(text))


def test_the_bound_never_passes_the_embedded_models_real_count() -> None:
    """On the embedded model's own tokenizer (byte-level BPE, 49,152 ids, with tokens for
    runs of spaces and digits): random text, and the text that packs the most bytes into
    each token, its longest token repeated."""
    from transformers import AutoTokenizer
    from vllm.tokenizers.hf import get_cached_tokenizer

    from oai_server.engine.vllm.holder import VLLMTokenizer
    from tests.unit.tool_families import _embedded_dir

    backend = get_cached_tokenizer(AutoTokenizer.from_pretrained(_embedded_dir()))
    tokenizer, vocab_size = VLLMTokenizer(backend), len(backend)
    longest = longest_token_bytes(tokenizer, vocab_size)
    assert longest is not None
    widest = max(range(vocab_size), key=lambda i: len(backend.decode([i]).encode()))
    texts = [backend.decode([widest]) * 50, " " * 5_000, "1234567890" * 500]
    rng = random.Random(7)
    # Spaces and runs of them, digits, words, CJK, emoji (one with a skin tone), code.
    pieces = (
        " |  |    |\n|\t|0|42|1999|the| the|Hello| world|.|é|中文|日本語|😀|👍🏽|\u200b|f(x):\n  "
    )
    for _ in range(200):
        texts.append("".join(rng.choice(pieces.split("|")) for _ in range(rng.randint(1, 400))))
    for text in texts:
        count = len(tokenizer.encode(text, add_special_tokens=False))
        assert 0 < tokens_at_least(text, longest, 1) <= count, text[:40]


def test_a_tokenizer_that_folds_text_gets_no_bound() -> None:
    assert longest_token_bytes(LowerCasingTokenizer(), 256) is None
    assert tokens_at_least("X" * 100_000, None, 10) == 0


async def test_the_first_oversized_prompt_after_a_start_is_refused_untokenized() -> None:
    # Worked out lazily, on a first long prompt, the bound missed every prompt of the
    # first seconds after a start: each was tokenized in full (2.0-2.6 s of a 3 MB prompt
    # on the real tokenizer) to be refused.
    tokenizer = CountingTokenizer()
    engine = OneTokenizerEngine(tokenizer, max_model_len=2048)
    big = "word " * 200_000
    async with serve(engine) as client:  # as soon as the engine says it is ready
        assert engine.model_info.longest_token_bytes is not None
        chat = await client.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": big}]},
        )
        completion = await client.post("/v1/completions", json={"model": MODEL, "prompt": big})
    for response in (chat, completion):
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert error["type"] == "invalid_request_error"
        assert "maximum context length is 2048 tokens" in error["message"]
    assert chat.json()["error"]["param"] == "messages"
    assert completion.json()["error"]["param"] == "prompt"
    assert all(length < len(big) for length in tokenizer.encoded)
