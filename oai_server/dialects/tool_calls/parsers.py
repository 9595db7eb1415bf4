"""Turn a choice's generated text into content and tool calls, as it streams.

Each parser is fed text deltas and returns events in order: content text, the start
of a tool call (its id and function name), fragments of a call's JSON arguments.
OpenAI streams tool calls exactly that way, so the stream maps events one to one
onto deltas, and the whole answer is just their sum.

- `ContentOnly`: no tools; everything is content.
- `NamedFunction`: decoding was constrained to the arguments of one named function.
- `RequiredCalls`: decoding was constrained to `[{"name": ..., "parameters": {...}}, ...]`.
- `HermesCalls`: free text in which the model writes `<tool_call>{json}</tool_call>`
  (the Hermes/Qwen style), for `tool_choice="auto"` on a model of no family recognised.
  Kept beside vLLM's hermes parser for what that one does not do: text between and after
  calls stays content (vLLM's keeps only the text before the first call), a malformed
  call stays the user's text, and it needs no tokenizer (the fake engine's is bytes).
- `EngineCalls`: any of vLLM's parsers (`engine/parsing.py`), for `tool_choice="auto"`.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from oai_server.dialects.gate import EVERY_DELTA, Markers, passed
from oai_server.engine.parsing import CallDelta, OutputTextParser, ParsedDelta
from oai_server.ids import new_call_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Content:
    text: str


@dataclass(frozen=True, slots=True)
class CallStart:
    index: int
    id: str
    name: str
    # A custom tool's call (`tool_calls.custom`): its arguments are the input text.
    custom: bool = False


@dataclass(frozen=True, slots=True)
class CallArguments:
    index: int
    text: str
    custom: bool = False


Event = Content | CallStart | CallArguments


class OutputParser(abc.ABC):
    """Splits one choice's text into events."""

    calls = 0

    @abc.abstractmethod
    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        """Events for the next piece of generated text (and its token ids, if known)."""

    def finish(self) -> list[Event]:
        """Events for whatever was held back, once generation ended."""
        return []


class ContentOnly(OutputParser):
    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        return [Content(text)] if text else []


class NamedFunction(OutputParser):
    """All output is the arguments of `name` (with `custom`: the input of the custom tool
    `name`, forced by `tool_choice`)."""

    def __init__(self, name: str, custom: bool = False) -> None:
        self.name = name
        self.custom = custom

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        events: list[Event] = []
        if self.calls == 0:
            self.calls = 1
            events.append(CallStart(0, new_call_id(), self.name, custom=self.custom))
        if text:
            events.append(CallArguments(0, text, custom=self.custom))
        return events


class RequiredCalls(OutputParser):
    """Scans the constrained JSON array character by character.

    The grammar fixes each item's key order (`name`, then `parameters`), so a call
    starts once its name string closes, and its arguments are the raw text of the
    `parameters` object, passed on as it arrives: no re-serialization, so the
    fragments add up to exactly what the model wrote.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.string = ""
        self.expecting_key = False
        self.key = ""
        self.in_arguments = False

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        events: list[Event] = []
        arguments = ""
        for ch in text:
            if self.in_arguments:
                arguments += ch
            if self.in_string:
                self._string_char(ch, events)
            elif ch == '"':
                self.in_string, self.string = True, ""
            elif ch in "{[":
                self.depth += 1
                if self.depth == 2:
                    self.expecting_key = True
                elif self.depth == 3 and self.key == "parameters" and ch == "{":
                    self.in_arguments, arguments = True, "{"
            elif ch in "}]":
                if self.in_arguments and self.depth == 3:
                    self.in_arguments = False
                    events.append(CallArguments(self.calls - 1, arguments))
                    arguments = ""
                self.depth -= 1
            elif self.depth == 2 and ch == ":":
                self.expecting_key = False
            elif self.depth == 2 and ch == ",":
                self.expecting_key = True
        if arguments:
            events.append(CallArguments(self.calls - 1, arguments))
        return events

    def _string_char(self, ch: str, events: list[Event]) -> None:
        if self.escaped:
            self.escaped = False
            self.string += ch
        elif ch == "\\":
            self.escaped = True
            self.string += ch
        elif ch == '"':
            self.in_string = False
            if self.depth != 2:
                return
            if self.expecting_key:
                self.key = self.string
            elif self.key == "name":
                events.append(CallStart(self.calls, new_call_id(), json.loads(f'"{self.string}"')))
                self.calls += 1
        else:
            self.string += ch


class HermesCalls(OutputParser):
    """Content, with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks as calls."""

    OPEN, CLOSE = "<tool_call>", "</tool_call>"

    def __init__(self) -> None:
        self.buffer = ""
        self.inside = False

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        self.buffer += text
        events: list[Event] = []
        while True:
            if self.inside:
                end = self.buffer.find(self.CLOSE)
                if end == -1:
                    return events
                events += self._call(self.buffer[:end])
                self.buffer = self.buffer[end + len(self.CLOSE) :]
                self.inside = False
            else:
                start = self.buffer.find(self.OPEN)
                if start == -1:
                    # Hold back a tail that may be the start of the tag.
                    keep = _partial_suffix(self.buffer, self.OPEN)
                    cut = len(self.buffer) - keep
                    if cut:
                        events.append(Content(self.buffer[:cut]))
                    self.buffer = self.buffer[cut:]
                    return events
                if start:
                    events.append(Content(self.buffer[:start]))
                self.buffer = self.buffer[start + len(self.OPEN) :]
                self.inside = True

    def finish(self) -> list[Event]:
        rest, self.buffer = self.buffer, ""
        if self.inside:
            self.inside = False
            return self._call(rest) or [Content(self.OPEN + rest)]
        return [Content(rest)] if rest else []

    def _call(self, body: str) -> list[Event]:
        try:
            call = json.loads(body)
            name = call["name"]
            arguments = call.get("arguments", call.get("parameters", {}))
        except (ValueError, KeyError, TypeError):
            # Not a well-formed call: leave the text to the user rather than lose it.
            return [Content(self.OPEN + body + self.CLOSE)]
        index = self.calls
        self.calls += 1
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return [CallStart(index, new_call_id(), str(name)), CallArguments(index, text)]


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that begins `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class EngineCalls(OutputParser):
    """The events of one of the engine's parsers (vLLM's, by name).

    Streamed, a delta goes to the parser where it can hold one of the family's markers
    (`oai_server.dialects.gate`); one that cannot, after the parser gave the delta before
    it back unchanged as content or as one call's arguments, goes out as the same without
    it, and reaches the parser with the next delta it is given. vLLM's deltas map one to
    one onto events; `whole` (an answer not streamed), the text is parsed once at the
    end, as `vllm serve` parses a whole answer. With `parallel` off only the first call
    goes out, as `vllm serve` filters calls when `parallel_tool_calls` is false.
    """

    def __init__(
        self,
        parser: OutputTextParser,
        *,
        whole: bool,
        parallel: bool,
        markers: Markers = EVERY_DELTA,
    ) -> None:
        self.parser = parser
        self.whole = whole
        self.parallel = parallel
        self.markers = markers
        self.text = ""
        self.ids: dict[int, str] = {}
        # What the parser last gave back unchanged: content (-1), a call's arguments (its
        # index), or None (anything else: the next delta goes to the parser). A quiet
        # delta is the same (`wait`).
        self.echo: int | None = None
        # The deltas sent without the parser since its last delta.
        self._missed: list[str] = []
        self._missed_ids: list[int] = []

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        if self.whole:
            self.text += text
            return []
        echo = self.echo
        if echo is not None and self.markers.quiet(text, token_ids):
            self.wait(text, token_ids)
            if echo < 0:
                return [Content(text)]
            return [CallArguments(echo, text)] if echo in self.ids else []
        return self._parse(text, token_ids, finished=False)

    def wait(self, text: str, token_ids: Sequence[int]) -> None:
        """Take a delta that can hold no marker, while the parser echoes (`echo`), as what
        it echoes, without the parser: it reads the delta with the next one it is fed."""
        self._missed.append(text)
        self._missed_ids += token_ids

    def finish(self) -> list[Event]:
        if self.whole:
            return self._events(self.parser.whole(self.text))
        return self._parse("", (), finished=True)

    def _parse(self, text: str, token_ids: Sequence[int], *, finished: bool) -> list[Event]:
        """The parser's events for the deltas it missed and this one, less what of them
        went out unparsed."""
        missed = "".join(self._missed)
        ids = self._missed_ids + list(token_ids) if missed else token_ids
        delta = self.parser.feed(missed + text, ids, finished=finished)
        if missed:
            self._missed, self._missed_ids = [], []
            delta = self._unsent(delta, missed)
        self.echo = _echo_of(delta, text)
        return self._events(delta)

    def _unsent(self, delta: ParsedDelta | None, sent: str) -> ParsedDelta | None:
        """`delta` without `sent`, the start of its content or of its current call's
        arguments that went out unparsed."""
        echo = self.echo
        if delta is not None and echo is not None and echo < 0:
            rest = passed(delta.content, sent)
            if rest is not None:
                return ParsedDelta(rest, delta.calls)
        elif delta is not None:
            calls = list(delta.calls)
            at = next((i for i, c in enumerate(calls) if c.index == echo and c.arguments), None)
            rest = None if at is None else passed(calls[at].arguments, sent)
            if at is not None and rest is not None:
                call = calls[at]
                calls[at] = CallDelta(call.index, call.id, call.name, rest)
                return ParsedDelta(delta.content, calls)
        # The parser did not give back what went out: its family belongs in `PER_TOKEN`.
        logger.warning("tool-call parser gave back other than the text sent unparsed: %r", sent)
        return delta

    def _events(self, delta: ParsedDelta | None) -> list[Event]:
        if delta is None:
            return []
        events: list[Event] = [Content(delta.content)] if delta.content else []
        for call in delta.calls:
            if call.index > 0 and not self.parallel:
                continue
            if call.name is not None and call.index not in self.ids:
                self.ids[call.index] = call.id or new_call_id()
                events.append(CallStart(call.index, self.ids[call.index], call.name))
                self.calls = len(self.ids)
            if call.arguments and call.index in self.ids:
                events.append(CallArguments(call.index, call.arguments))
        return events


def _echo_of(delta: ParsedDelta | None, text: str) -> int | None:
    """What `delta` (the parser's answer to `text`) shows the parser doing with a delta:
    giving it back as content (-1), as call `index`'s arguments (the index), or else None."""
    if delta is None or not text:
        return None
    if not delta.calls:
        return -1 if delta.content == text else None
    if delta.content or len(delta.calls) != 1:
        return None
    call = delta.calls[0]
    if call.name is None and call.id is None and call.arguments == text:
        return call.index
    return None
