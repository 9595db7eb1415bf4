"""The whole text completion as the sum of its streamed events (see `chat_assembler`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oai_server.generation.logprobs import completion_logprobs, merge_completion_logprobs
from oai_server.services.common import usage_of
from oai_server.services.events import TextDelta, Usage
from schemas.common import CompletionUsage
from schemas.completions import CompletionChoice, CompletionLogprobs, CreateCompletionResponse


@dataclass
class _Choice:
    text: str = ""
    logprobs: CompletionLogprobs | None = None
    finish_reason: Literal["stop", "length", "content_filter"] | None = None
    stop_reason: str | int | None = None


class CompletionAssembler:
    """Folds a completions stream's events into the `text_completion` they add up to."""

    def __init__(self, *, with_logprobs: bool) -> None:
        self._with_logprobs = with_logprobs
        self._choices: dict[int, _Choice] = {}
        self._head: CreateCompletionResponse | None = None
        self._usage: CompletionUsage | None = None

    def add(self, event: CreateCompletionResponse | TextDelta | Usage) -> None:
        if isinstance(event, TextDelta):
            self._choices.setdefault(event.index, _Choice()).text += event.text
            return
        if isinstance(event, Usage):
            self._usage = usage_of(event)
            return
        if self._head is None:
            self._head = event
        for c in event.choices:
            state = self._choices.setdefault(c.index, _Choice())
            state.text += c.text
            if c.logprobs is not None:
                if state.logprobs is None:
                    state.logprobs = completion_logprobs([], 0)
                merge_completion_logprobs(state.logprobs, c.logprobs)
            if c.finish_reason is not None:
                state.finish_reason = c.finish_reason
            if c.stop_reason is not None:
                state.stop_reason = c.stop_reason
        if event.usage is not None:
            self._usage = event.usage

    def result(self, response_id: str, created: int, model: str) -> CreateCompletionResponse:
        """The whole answer; call once every event has been added."""
        return CreateCompletionResponse(
            id=response_id,
            created=created,
            model=model,
            choices=[self._choice(i, c) for i, c in sorted(self._choices.items())],
            usage=self._usage,
        )

    def _choice(self, index: int, state: _Choice) -> CompletionChoice:
        logprobs = None
        if self._with_logprobs:
            logprobs = state.logprobs or completion_logprobs([], 0)
        choice = CompletionChoice(
            index=index,
            text=state.text,
            logprobs=logprobs,
            finish_reason=state.finish_reason,
        )
        if state.stop_reason is not None:
            choice.stop_reason = state.stop_reason
        return choice
