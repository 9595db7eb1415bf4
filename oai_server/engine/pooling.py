"""The embedding engine interface: what `/v1/embeddings` needs from a pooling model.

The twin of `engine/protocol.py` for models that turn a prompt into one vector instead
of generating text. `engine/vllm/pooling.py` implements it over vLLM's `AsyncLLM` with
`runner="pooling"`; `engine/fake/pooling.py` with deterministic vectors for tests.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Literal

from oai_server.engine.protocol import Tokenizer


@dataclass(frozen=True, slots=True)
class EmbeddingModelInfo:
    """What the server needs to know about a loaded embedding model."""

    max_model_len: int
    # Where the weights came from: a local directory or a hub id.
    source: str
    vocab_size: int
    # Length of the vectors it returns.
    dimensions: int
    # Whether a vector may be shortened to its first d values (Matryoshka training);
    # only then does a request's `dimensions` mean anything.
    matryoshka: bool = False
    dtype: str | None = None
    # As `ModelInfo.longest_token_bytes`.
    longest_token_bytes: int | None = None
    # What its pooler does: embed (a vector per text) or classify (a cross-encoder or a
    # classifier: one probability per label of a text, or of a pair of texts).
    task: Literal["embed", "classify"] = "embed"
    # A classifier's labels, by index (its config's `id2label`).
    labels: tuple[str, ...] = ()


class EmbeddingEngine(abc.ABC):
    """An engine that embeds token sequences; started and stopped like the chat engine."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Load the model; return when the engine can serve."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Release the engine and everything it started."""

    @property
    @abc.abstractmethod
    def model_info(self) -> EmbeddingModelInfo:
        """Facts about the loaded model; valid after `start`."""

    @property
    @abc.abstractmethod
    def tokenizer(self) -> Tokenizer:
        """The loaded model's tokenizer; valid after `start`. The same object on every
        call: what the server works out once per tokenizer (the prompt bound's longest
        token, a pass over the vocabulary) is kept by it."""

    @abc.abstractmethod
    async def embed(
        self, request_id: str, prompt_token_ids: list[int], dimensions: int | None = None
    ) -> list[float]:
        """The normalized embedding of one prompt, shortened to `dimensions` if given.

        Raises `EngineDeadError` if the engine fails, `EngineNotReadyError` before `start`
        completed. Cancelling the call aborts the engine request.
        """

    @abc.abstractmethod
    async def classify(
        self, request_id: str, prompt_token_ids: list[int], second_from: int | None = None
    ) -> list[float]:
        """A classifying model's probabilities for one prompt (one per label; a
        cross-encoder's one label is its score). `second_from`: where the second text of a
        pair begins (its token type ids are 1 from there on), for models that read them.

        Raises as `embed` does; `InvalidRequestError` when the model does not classify.
        """

    def pair(self, first: str, second: str) -> tuple[list[int], int | None]:
        """The token ids of two texts as the model reads them as a pair (its tokenizer's
        `text_pair`), and where the second begins when the model takes token type ids."""
        tokens = self.tokenizer.encode(first)
        return tokens + self.tokenizer.encode(second, add_special_tokens=False), None

    @abc.abstractmethod
    async def check_health(self) -> None:
        """Raise `EngineNotReadyError` or `EngineDeadError` unless the engine can serve."""

    @abc.abstractmethod
    def running_requests(self) -> int:
        """How many requests the engine is working on now."""
