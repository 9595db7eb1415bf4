"""One choice of a gpt-oss answer, read from its token ids by vLLM's harmony parser.

Harmony writes each message of the answer on a channel: `analysis` is the thinking,
`final` the answer, `commentary` addressed `to=functions.NAME` a call of the tool NAME.
vLLM's `HarmonyParser` reads them with harmony's `StreamableParser`; this stage feeds
it the ids of each delta as `vllm serve`'s chat service does (`parse_delta`, flushed at
the end), or all of them at once for an answer not streamed (`parse`), and turns what
it returns into the events the chat choice sends: thinking, content, and each call's
id and name, then its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oai_server.dialects.reasoning.stage import Reasoning
from oai_server.dialects.tool_calls.parsers import CallArguments, CallStart, Content, Event
from oai_server.ids import new_call_id

HarmonyEvent = Event | Reasoning


@dataclass
class HarmonyStage:
    """vLLM's harmony parser for one choice of `request` (vLLM's chat request).

    `whole`: the ids are kept and parsed once at the end, as `vllm serve` parses an
    answer not streamed. With `parallel` off, only the first call goes out, as for every
    other family (`tool_calls.parsers.EngineCalls`).
    """

    parser: Any
    request: Any
    whole: bool = False
    parallel: bool = True
    token_ids: list[int] = field(default_factory=list)
    calls: int = 0

    def feed(self, token_ids: Sequence[int]) -> list[HarmonyEvent]:
        """The events of the next tokens (none yet for an answer not streamed)."""
        self.token_ids += token_ids
        if self.whole or not token_ids:
            return []
        return self._events(self._delta(list(token_ids), finished=False))

    def finish(self) -> list[HarmonyEvent]:
        """The events of what the parser held at the end (all of them, `whole`)."""
        if not self.whole:
            return self._events(self._delta([], finished=True))
        reasoning, content, calls = self.parser.parse(
            "", self.request, enable_auto_tools=True, model_output_token_ids=self.token_ids
        )
        events: list[HarmonyEvent] = []
        if reasoning and self.request.include_reasoning:
            events.append(Reasoning(reasoning))
        if content:
            events.append(Content(content))
        for call in calls or ():
            if self.calls and not self.parallel:
                break
            events += [CallStart(self.calls, new_call_id(), call.name)]
            if call.arguments:
                events.append(CallArguments(self.calls, call.arguments))
            self.calls += 1
        return events

    @property
    def reasoning_tokens(self) -> int:
        """The answer's thinking in tokens, as vLLM counts it (the analysis channel's,
        and a call's arguments)."""
        return int(self.parser.count_reasoning_tokens(self.token_ids))

    def _delta(self, token_ids: list[int], *, finished: bool) -> Any:
        return self.parser.parse_delta(
            "", token_ids, self.request, prompt_token_ids=[], finished=finished
        )

    def _events(self, delta: Any) -> list[HarmonyEvent]:
        if delta is None:
            return []
        events: list[HarmonyEvent] = []
        if delta.reasoning:
            events.append(Reasoning(delta.reasoning))
        if delta.content:
            events.append(Content(delta.content))
        for call in delta.tool_calls or ():
            if call.index > 0 and not self.parallel:
                continue
            function = call.function
            if call.id is not None and function is not None and function.name:
                events.append(CallStart(call.index, call.id, function.name))
                self.calls = max(self.calls, call.index + 1)
            if function is not None and function.arguments:
                events.append(CallArguments(call.index, function.arguments))
        return events
