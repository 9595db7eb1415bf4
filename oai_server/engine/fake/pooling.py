"""A deterministic embedding engine with the same interface as the vLLM adapter.

Each vector is a function of the prompt's token ids alone (a seeded pseudo-random unit
vector), so equal inputs embed equally and different ones differently, as a test needs.
Its tokenizer is the fake chat engine's: one token per UTF-8 byte.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import struct
from dataclasses import dataclass, field

from oai_server.engine.fake.engine import FakeTokenizer
from oai_server.engine.pooling import EmbeddingEngine, EmbeddingModelInfo
from oai_server.engine.protocol import Tokenizer
from oai_server.engine.token_bytes import longest_token_bytes
from oai_server.errors import EngineDeadError, EngineNotReadyError


def unit(values: list[float]) -> list[float]:
    """`values` scaled to length 1, each rounded to float32 as a real engine's are."""
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    scaled = [v / norm for v in values]
    return list(struct.unpack(f"{len(scaled)}f", struct.pack(f"{len(scaled)}f", *scaled)))


@dataclass
class FakeEmbeddingEngine(EmbeddingEngine):
    """Vectors of `dimensions` floats; `matryoshka` allows shortening them."""

    dimensions: int = 8
    max_model_len: int = 64
    matryoshka: bool = False
    # A cross-encoder (`classify`, one label) instead of an embedding model.
    labels: tuple[str, ...] = ()
    start_delay: float = 0.0
    # The prompts embedded, in order.
    calls: list[list[int]] = field(default_factory=list)
    _ready: bool = False
    _dead: bool = False
    _running: int = 0
    _longest: int | None = None
    # One tokenizer, as a real engine holds its own.
    _tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer, repr=False, compare=False)

    async def start(self) -> None:
        await asyncio.sleep(self.start_delay)
        # As the real engine: worked out before the engine says it is ready.
        self._longest = longest_token_bytes(self._tokenizer, self.model_info.vocab_size)
        self._ready = True

    async def stop(self) -> None:
        self._ready = False

    @property
    def model_info(self) -> EmbeddingModelInfo:
        return EmbeddingModelInfo(
            max_model_len=self.max_model_len,
            source="fake-embedding",
            vocab_size=256,
            dimensions=self.dimensions,
            matryoshka=self.matryoshka,
            longest_token_bytes=self._longest,
            task="classify" if self.labels else "embed",
            labels=self.labels,
        )

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def kill(self) -> None:
        """Fail as a dead engine does from now on."""
        self._dead = True

    async def check_health(self) -> None:
        if self._dead:
            raise EngineDeadError("The embedding engine has stopped; restart the server.")
        if not self._ready:
            raise EngineNotReadyError("The embedding engine is still loading the model.")

    def running_requests(self) -> int:
        return self._running

    async def classify(
        self, request_id: str, prompt_token_ids: list[int], second_from: int | None = None
    ) -> list[float]:
        """Softmax (sigmoid for one label) of a seeded draw per label, as vLLM's classify
        pooler activates its logits."""
        await self.check_health()
        self.calls.append(list(prompt_token_ids))
        seed = hashlib.sha256(repr((prompt_token_ids, second_from)).encode()).digest()
        rng = random.Random(seed)
        logits = [rng.gauss(0.0, 2.0) for _ in self.labels]
        if len(logits) == 1:
            return [1.0 / (1.0 + math.exp(-logits[0]))]
        top = max(logits)
        exps = [math.exp(x - top) for x in logits]
        return [x / sum(exps) for x in exps]

    def pair(self, first: str, second: str) -> tuple[list[int], int | None]:
        """As a BERT tokenizer pairs: the second's tokens after the first's, typed 1."""
        tokens = self.tokenizer.encode(first)
        return tokens + self.tokenizer.encode(second), len(tokens)

    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        await self.check_health()
        self._running += 1
        try:
            await asyncio.sleep(0)
            self.calls.append(list(prompt_token_ids))
            seed = hashlib.sha256(repr(prompt_token_ids).encode()).digest()
            rng = random.Random(seed)
            values = unit([rng.gauss(0.0, 1.0) for _ in range(self.dimensions)])
            return unit(values[:dimensions]) if dimensions else values
        finally:
            self._running -= 1
