"""Engine-neutral data passed between the server and an engine.

These types are the whole vocabulary of the engine boundary: the server builds a
`SamplingOptions` and a list of prompt token ids, and reads back `GenerationStep`s.
Nothing here knows about HTTP or about vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True, slots=True)
class SamplingOptions:
    """What to generate: OpenAI's sampling fields plus vLLM's common extensions."""

    max_tokens: int
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    logit_bias: dict[int, float] | None = None


@dataclass(slots=True)
class ChoiceDelta:
    """New output of one choice since the previous step."""

    index: int
    text: str
    token_count: int
    finish_reason: FinishReason | None = None
    # The stop string or token id that ended the choice, when one did.
    stop_reason: str | int | None = None


@dataclass(slots=True)
class GenerationStep:
    """One engine iteration's worth of output for a request (only choices that moved)."""

    prompt_tokens: int
    choices: list[ChoiceDelta] = field(default_factory=list)
    finished: bool = False


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the server needs to know about the loaded model."""

    max_model_len: int
    # Where the weights came from: a local directory or a hub id.
    source: str
