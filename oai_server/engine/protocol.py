"""The engine interface: everything the server needs from an inference engine.

The server depends on this module only. `engine/vllm/engine.py` implements it over vLLM's
`AsyncLLM`; `engine/fake/engine.py` implements it with scripted output for tests and for
measuring the web layer alone. Both subclass `Engine`, so a fake cannot drift from
the real interface unnoticed by mypy.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from typing import Any

from oai_server.engine.parsing import HarmonyParsing, OutputParsing, ReasoningParsing
from oai_server.engine.settings import SchedulingPolicy
from oai_server.engine.types import GenerationStep, ImageInput, ModelInfo, SamplingOptions
from oai_server.errors import InvalidRequestError


def check_priority(options: SamplingOptions, scheduling_policy: SchedulingPolicy) -> None:
    """Refuse a `priority` that the engine's scheduler would ignore.

    vLLM itself rejects one under first-come-first-served scheduling; every engine (the
    fake included) asks here, so a test cannot pass on a rule the real engine breaks.
    """
    if options.priority and scheduling_policy != "priority":
        raise InvalidRequestError(
            "'priority' needs the server started with --scheduling-policy priority.",
            param="priority",
        )


class Tokenizer(abc.ABC):
    """The model's tokenizer and chat template."""

    @abc.abstractmethod
    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Turn text into token ids."""

    @abc.abstractmethod
    def decode(self, token_ids: Sequence[int]) -> str:
        """Turn token ids back into text."""

    @abc.abstractmethod
    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool,
        continue_final_message: bool = False,
        chat_template: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        """Render a conversation with the model's chat template (or `chat_template`)."""

    def chat_template_source(self) -> str | None:
        """The model's own chat template, as written (None: it has none)."""
        return None

    def special_tokens(self) -> frozenset[str]:
        """The tokens the model's vocabulary adds (special and added ones)."""
        return frozenset()

    def output_parsing(self, tool_call_parser: str) -> OutputParsing:
        """vLLM's tool-call parser `tool_call_parser` over this tokenizer; raises
        `ValueError` where it cannot serve (a name unknown, tokens the parser needs missing)."""
        raise ValueError(f"this tokenizer cannot serve the tool-call parser '{tool_call_parser}'")

    def reasoning_parsing(self, reasoning_parser: str) -> ReasoningParsing:
        """vLLM's reasoning parser `reasoning_parser` over this tokenizer; raises
        `ValueError` where it cannot serve (the tokens the parser looks for missing)."""
        raise ValueError(f"this tokenizer cannot serve the reasoning parser '{reasoning_parser}'")

    def harmony_parsing(self) -> HarmonyParsing:
        """gpt-oss's harmony over this tokenizer; raises `ValueError` where it has none."""
        raise ValueError("this tokenizer cannot serve harmony")


class Engine(abc.ABC):
    """An inference engine the server can start, feed and stop."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Load the model; return when the engine can serve."""

    def serving(self, model: str | None) -> Engine:
        """The engine that holds the chat model `model` (None: the first), for its
        `tokenizer` and `model_info`; an engine of one model holds it itself. Requests
        still go through `generate` here, with `SamplingOptions.model` naming the model,
        so whatever wraps this engine sees them."""
        return self

    @abc.abstractmethod
    async def stop(self) -> None:
        """Release the engine and everything it started."""

    @property
    @abc.abstractmethod
    def model_info(self) -> ModelInfo:
        """Facts about the loaded model; valid after `start`."""

    @property
    @abc.abstractmethod
    def tokenizer(self) -> Tokenizer:
        """The loaded model's tokenizer; valid after `start`. The same object on every
        call: what the server works out once per tokenizer (the prompt bound's longest
        token, a pass over the vocabulary) is kept by it."""

    @abc.abstractmethod
    def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        """Stream the output of one request, step by step, until it finishes.

        Raises `EngineDeadError` if the engine fails, `EngineNotReadyError` before
        `start` completed. Closing the iterator early aborts the request.
        """

    @abc.abstractmethod
    async def count_prompt_tokens(
        self, prompt_token_ids: list[int], images: Sequence[ImageInput]
    ) -> int:
        """How many tokens the prompt is as the model reads it, each image's placeholder
        expanded into that image's tokens: the `prompt_tokens` its answer's usage reports,
        without generating. Raises `InvalidRequestError` for images the model refuses."""

    @abc.abstractmethod
    async def load_adapter(self, name: str, path: str) -> None:
        """Load the LoRA adapter at `path` (already checked by `lora.check_adapter`) to
        answer requests whose `SamplingOptions.adapter` is `name`.

        Raises `InvalidRequestError` if the engine cannot serve it (off, weights that do
        not fit the model, a corrupt file); the engine and its other adapters go on.
        """

    @abc.abstractmethod
    async def unload_adapter(self, name: str) -> None:
        """Forget the adapter `name`; a no-op if it is not loaded."""

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop generating for `request_id`; a no-op if it already finished."""

    @abc.abstractmethod
    async def check_health(self) -> None:
        """Raise `EngineNotReadyError` or `EngineDeadError` unless the engine can serve."""

    @abc.abstractmethod
    def running_requests(self) -> int:
        """How many requests the engine is working on now."""
