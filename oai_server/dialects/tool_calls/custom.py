"""Custom tools (free-text input): how the model is shown them, and how their calls are read.

Chat templates know function tools only. A custom tool is shown to the model as a
function taking one string, `input`, its description saying the input's format (the
grammar, if it has one); an earlier call of it is shown as that function's call. The
model's call is read back from the arguments it writes: the `input` string, decoded as
it streams, becomes the custom call's input. Forced by name (`tool_choice`), the model
writes the input itself, raw, constrained by the tool's grammar (Lark, or a regular
expression) through the engine's structured output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from oai_server.dialects.tool_calls.parsers import CallArguments, CallStart, Event, OutputParser
from oai_server.engine.types import StructuredOutput
from schemas.chat import ChatCompletionCustomTool, CustomToolCall, GrammarFormat

INPUT = "input"
# The one parameter a custom tool is shown with.
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {INPUT: {"type": "string"}},
    "required": [INPUT],
    "additionalProperties": False,
}

_SYNTAX = {"lark": "Lark grammar", "regex": "regular expression"}


def as_function(tool: ChatCompletionCustomTool) -> dict[str, Any]:
    """`tool` as the function tool the chat template is given."""
    custom = tool.custom
    description = custom.description or ""
    if isinstance(custom.format, GrammarFormat):
        grammar = custom.format.grammar
        rule = f"The input must match this {_SYNTAX[grammar.syntax]}:\n{grammar.definition}"
        description = f"{description}\n\n{rule}" if description else rule
    function: dict[str, Any] = {"name": custom.name, "parameters": INPUT_SCHEMA}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def as_function_call(call: CustomToolCall) -> dict[str, Any]:
    """An earlier custom call as the function call the chat template is given."""
    arguments = json.dumps({INPUT: call.custom.input}, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.custom.name, "arguments": arguments},
    }


def grammar_of(tool: ChatCompletionCustomTool) -> StructuredOutput | None:
    """The constraint on `tool`'s input, when its format is a grammar."""
    fmt = tool.custom.format
    if not isinstance(fmt, GrammarFormat):
        return None
    if fmt.grammar.syntax == "lark":
        return StructuredOutput(grammar=fmt.grammar.definition)
    return StructuredOutput(regex=fmt.grammar.definition)


class _InputDecoder:
    """Reads the input string out of a call's JSON arguments as they stream.

    The first value of the object is taken if it is a string (`input`, or whatever key
    the model chose); arguments of any other shape are the input as written, given once
    the answer ends.
    """

    def __init__(self) -> None:
        # start, key, in_key, colon, value, string, done; raw: not `{"key": "..."}`.
        self.state = "start"
        self.raw = ""
        self.escape = ""
        self.high = ""  # a high surrogate waiting for its pair

    def feed(self, text: str) -> str:
        self.raw += text
        out: list[str] = []
        for ch in text:
            if self.state == "string":
                out.append(self._char(ch))
            elif self.state == "in_key":
                self._key_char(ch)
            elif self.state in ("done", "raw"):
                break
            elif ch.isspace():
                continue
            else:
                self.state = self._after(ch)
        return "".join(out)

    def _after(self, ch: str) -> str:
        """The state after `ch`, outside any string."""
        expected = {"start": "{", "key": '"', "colon": ":", "value": '"'}[self.state]
        if ch != expected:
            return "raw"
        return {"start": "key", "key": "in_key", "colon": "value", "value": "string"}[self.state]

    def _key_char(self, ch: str) -> None:
        if self.escape:
            self.escape = ""
        elif ch == "\\":
            self.escape = ch
        elif ch == '"':
            self.state = "colon"

    def _char(self, ch: str) -> str:
        if self.escape:
            self.escape += ch
            if self.escape[1] == "u" and len(self.escape) < 6:
                return ""
            escape, self.escape = self.escape, ""
            try:
                decoded = str(json.loads(f'"{escape}"'))
            except ValueError:
                decoded = escape
            if "\ud800" <= decoded <= "\udbff":
                self.high = decoded
                return ""
            if self.high:
                pair, self.high = self.high + decoded, ""
                return pair.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return decoded
        if ch == "\\":
            self.escape = ch
            return ""
        if ch == '"':
            self.state = "done"
            return ""
        return ch

    def rest(self) -> str:
        """What is left to give once the answer ended: arguments of another shape."""
        if self.state in ("string", "done"):
            return ""
        return self.raw


class CustomInputs(OutputParser):
    """`inner`'s events, with the calls of the custom tools `names` as custom calls."""

    def __init__(self, inner: OutputParser, names: frozenset[str]) -> None:
        self.inner = inner
        self.names = names
        self.decoders: dict[int, _InputDecoder] = {}

    def feed(self, text: str, token_ids: Sequence[int] = ()) -> list[Event]:
        return self._events(self.inner.feed(text, token_ids))

    def finish(self) -> list[Event]:
        events = self._events(self.inner.finish())
        for index, decoder in self.decoders.items():
            rest = decoder.rest()
            if rest:
                events.append(CallArguments(index, rest, custom=True))
        return events

    def _events(self, events: list[Event]) -> list[Event]:
        self.calls = self.inner.calls
        out: list[Event] = []
        for event in events:
            if isinstance(event, CallStart) and event.name in self.names:
                self.decoders[event.index] = _InputDecoder()
                out.append(CallStart(event.index, event.id, event.name, custom=True))
            elif isinstance(event, CallArguments) and event.index in self.decoders:
                text = self.decoders[event.index].feed(event.text)
                if text:
                    out.append(CallArguments(event.index, text, custom=True))
            else:
                out.append(event)
        return out
