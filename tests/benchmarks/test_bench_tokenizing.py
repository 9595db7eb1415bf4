"""`python -m benchmarks tokenizing`: the same prompts through a pool of threads or processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from benchmarks import tokenizing
from oai_server.models.embedded_model import ensure_embedded_model
from oai_server.settings import Settings


def test_prompts_are_as_long_as_asked_and_differ() -> None:
    first, second = tokenizing.prompt_text(5_000, 0), tokenizing.prompt_text(5_000, 1)
    assert 5_000 <= len(first) < 5_100
    assert first != second


def test_a_pool_counts_every_prompts_tokens() -> None:
    tokenizing._load(str(ensure_embedded_model(Settings().cache_dir)))
    texts = [tokenizing.prompt_text(2_000, seed) for seed in range(4)]
    expected = sum(len(tokenizing._tokenizer.encode(t, add_special_tokens=False)) for t in texts)
    with ThreadPoolExecutor(2) as pool:
        tokens, seconds = tokenizing._rate(pool, texts)
    assert tokens == expected
    assert seconds > 0
