"""Prompts of an exact token length under a model's tokenizer.

"Exact" means what the server will count: for the completions API the prompt encoded with the
tokenizer's special tokens; for the chat API the user message rendered by the model's chat template
and encoded without adding special tokens again (as vLLM does).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol, cast

ATTEMPTS = 20  # fresh random starts before giving up
FIXUPS = 30  # decode / re-encode rounds per start


class HFTokenizer(Protocol):
    """The part of a `transformers` tokenizer used here."""

    vocab_size: int
    all_special_ids: list[int]

    def encode(self, text: str, *, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...


def load_tokenizer(directory: str) -> HFTokenizer:
    """Load the tokenizer of a model directory (imports transformers, which takes a few seconds)."""
    from transformers import AutoTokenizer

    return cast(HFTokenizer, AutoTokenizer.from_pretrained(directory))


def chat_prompt_ids(tokenizer: HFTokenizer, messages: list[dict[str, str]]) -> list[int]:
    """The token ids a vLLM-style server makes of a chat request: template, then encode as is."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def prompt_ids(tokenizer: HFTokenizer, api: str, text: str) -> list[int]:
    """The token ids the server sees for `text` as a completions prompt or a chat user message."""
    if api == "chat":
        return chat_prompt_ids(tokenizer, [{"role": "user", "content": text}])
    return tokenizer.encode(text, add_special_tokens=True)


class ExactPromptBuilder:
    """Random text whose prompt, sent through `api`, is exactly the requested number of tokens."""

    def __init__(self, tokenizer: HFTokenizer, api: str) -> None:
        self.tokenizer = tokenizer
        self.measure: Callable[[str], list[int]] = lambda text: prompt_ids(tokenizer, api, text)
        special = set(tokenizer.all_special_ids)
        self.allowed = [i for i in range(tokenizer.vocab_size) if i not in special]
        self.overhead = len(self.measure(""))  # special tokens or chat template around the text

    def build(self, length: int, rng: random.Random) -> tuple[str, list[int]]:
        """Text of exactly `length` prompt tokens, and those token ids.

        Samples random token ids, decodes them, then re-encodes and adds or cuts tokens until the
        length is exact: decoding random ids rarely gives back the same ids, so a few rounds are
        usually needed.
        """
        want = length - self.overhead
        if want < 1:
            raise ValueError(
                f"input length {length} leaves no room for text: the prompt adds {self.overhead}"
            )
        for _ in range(ATTEMPTS):
            content = self._sample(want, rng)
            for _ in range(FIXUPS):
                text = self.tokenizer.decode(content)
                ids = self.measure(text)
                missing = length - len(ids)
                if missing == 0:
                    return text, ids
                content = self.tokenizer.encode(text, add_special_tokens=False)
                content = content + self._sample(missing, rng) if missing > 0 else content[:missing]
        raise RuntimeError(f"could not build a prompt of exactly {length} tokens")

    def _sample(self, count: int, rng: random.Random) -> list[int]:
        return [rng.choice(self.allowed) for _ in range(count)]
