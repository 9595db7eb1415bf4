"""Qwen3-Coder's tool calls, read as they stream, as vLLM's `qwen3_coder` parser reads them.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Oslo
    </parameter>
    </function>
    </tool_call>

vLLM's parser turns the `<parameter=K>V</parameter>` tags into JSON by re-reading the whole
call at each piece that holds a marker (its end tags included): the cost of a call's end
grows with its length. This one keeps its place and turns each piece into its JSON at
once: a string value streams as its JSON-escaped text, one newline at either end of the
value dropped (the template's), `{"K": "`, `", "K2": "` and `"}` between values, `{}` for
a call of none; text before a call goes out as content, a lone newline between calls not.

It reads only what it can be sure vLLM's parser reads the same way, and hands everything
else to vLLM's parser (`replay.Replayed`): a `<` in content or between tags that is not a
tool-call tag, a tag not written as its special token, any other marker token, a value
that may hold a tag (`<parameter`, `</function`, `<|`...), a parameter the tool's schema
does not type as a string (vLLM converts it), a repeated parameter, and text after a
call where none came before it (whether vLLM's parser keeps its whitespace depends on how
the text was cut into pieces). A call still open at the end is closed as vLLM's parser
closes it. A whole answer (not streamed) is vLLM's to read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum, auto
from typing import Any

from oai_server.dialects.tool_calls.replay import Replayed, Sent
from oai_server.engine.parsing import CallDelta, OutputTextParser, ParsedDelta

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNCTION, FUNCTION_END = "<function=", "</function>"
PARAMETER, PARAMETER_END = "<parameter=", "</parameter>"
# After a `<` in a value (and spaces, a `/`), the words that may make it a tag to vLLM's
# parser: its own tags' and a special token's (`<|`).
_TAG_WORDS = ("parameter", "function", "tool_call", "think", "|")
_TAG_HEAD = re.compile(r"<\s*(?:/\s*)?")
# Schema keywords by which vLLM's parser may read a string parameter as another type.
_CONVERTED = ("enum", "anyOf", "oneOf", "allOf", "const")


class _State(Enum):
    CONTENT = auto()
    PREAMBLE = auto()  # after <tool_call>
    NAME = auto()  # after <function=
    ARGUMENTS = auto()  # between parameters
    KEY = auto()  # after <parameter=
    VALUE = auto()  # after <parameter=K>
    BETWEEN = auto()  # after </function>


class _UnsureError(Exception):
    """What is read is not a shape this parser is sure vLLM's reads the same way."""


class Qwen3CoderCalls(OutputTextParser):
    """One choice's Qwen3-Coder calls; `make` makes vLLM's parser for the same choice."""

    def __init__(
        self,
        make: Callable[[], OutputTextParser],
        tools: Sequence[Mapping[str, Any]],
        added: Mapping[str, int | None],
        marker_ids: frozenset[int],
    ) -> None:
        self._make = make
        # A function's properties, by its name (the first tool of a name, as vLLM's).
        self._properties: dict[str, Any] = {}
        for tool in tools:
            function = tool.get("function") or {}
            parameters = function.get("parameters") or {}
            self._properties.setdefault(str(function.get("name")), parameters.get("properties"))
        self._tag_ids = {tag: added.get(tag) for tag in (TOOL_START, TOOL_END)}
        self._other_ids = marker_ids - set(self._tag_ids.values())
        self._ids_seen = {TOOL_START: 0, TOOL_END: 0}
        self._tags_read = {TOOL_START: 0, TOOL_END: 0}
        self._deltas: list[tuple[str, Sequence[int]]] = []
        self._sent = Sent()
        self._engine: Replayed | None = None
        self._state = _State.CONTENT
        self._buffer = ""
        self._spaces = ""  # whitespace held: content only once text follows
        self._words = False  # whether content other than whitespace went out
        self._index = -1
        self._name = ""
        self._key = ""
        self._keys: set[str] = set()
        self._lead = True  # the value's first character is still to come
        self._held = ""  # a newline at the end of the value so far
        self._content: list[str] = []
        self._calls: list[CallDelta] = []

    def feed(self, text: str, token_ids: Sequence[int], *, finished: bool) -> ParsedDelta | None:
        if self._engine is not None:
            return self._engine.feed(text, token_ids, finished=finished)
        self._deltas.append((text, tuple(token_ids)))
        self._content, self._calls = [], []
        try:
            self._read_ids(token_ids)
            self._buffer += text
            self._read()
            if finished:
                self._finish()
        except _UnsureError:
            return self._hand_over(text, token_ids, finished)
        content = "".join(self._content) or None
        return self._sent.add(ParsedDelta(content, self._calls))

    def whole(self, text: str) -> ParsedDelta:
        return self._make().whole(text)

    def _hand_over(self, text: str, token_ids: Sequence[int], finished: bool) -> ParsedDelta | None:
        """vLLM's parser from here on, fed the deltas so far; what it gives that was not sent."""
        self._engine = Replayed(self._make, self._deltas[:-1], self._sent)
        self._deltas = []
        caught_up = self._engine.caught_up
        delta = self._engine.feed(text, token_ids, finished=finished)
        if delta is not None:
            caught_up.content = (caught_up.content or "") + (delta.content or "") or None
            caught_up.calls += delta.calls
        return caught_up if caught_up.content or caught_up.calls else None

    def _read_ids(self, token_ids: Sequence[int]) -> None:
        if not self._other_ids.isdisjoint(token_ids):
            raise _UnsureError
        for tag, i in self._tag_ids.items():
            if i is not None and i in token_ids:
                self._ids_seen[tag] += token_ids.count(i)

    def _tag(self, tag: str) -> None:
        """A tool-call tag read: vLLM's parser reads it only as its special token."""
        self._tags_read[tag] += 1
        if self._tag_ids[tag] is not None and self._tags_read[tag] > self._ids_seen[tag]:
            raise _UnsureError

    def _read(self) -> None:
        readers = {
            _State.CONTENT: self._read_content,
            _State.PREAMBLE: self._read_preamble,
            _State.NAME: self._read_name,
            _State.ARGUMENTS: self._read_arguments,
            _State.KEY: self._read_key,
            _State.VALUE: self._read_value,
            _State.BETWEEN: self._read_between,
        }
        while self._buffer and readers[self._state]():
            pass

    def _finish(self) -> None:
        """The end, as vLLM's parser ends: text held (the start of a tag that never came)
        read as the text it is, a call still open closed with the parameters it closed."""
        held, self._buffer = self._buffer, ""
        state = self._state
        if state == _State.CONTENT:
            if held:
                self._text(held)
            if self._spaces and self._index < 0:
                self._content.append(self._spaces)
            self._spaces = ""
        elif state == _State.NAME:
            # Its name so far, and no arguments.
            name = self._name + held
            if name:
                self._calls.append(CallDelta(self._index, None, name, "{}"))
        elif state == _State.VALUE:
            # The open value streams on to its end, and stays open: vLLM's parser closes a
            # call with the parameters it closed, which the value's text no longer begins.
            if held:
                self._value(held)
        elif state in (_State.ARGUMENTS, _State.KEY):
            self._arguments('"}' if self._keys else "{}")

    def _upto_tag(self) -> tuple[str, str]:
        """The buffer's text before its first `<`, and the rest."""
        at = self._buffer.find("<")
        if at < 0:
            return self._buffer, ""
        return self._buffer[:at], self._buffer[at:]

    def _choose(self, rest: str, tags: Sequence[str]) -> str | None:
        """The tag of `tags` that `rest` begins with; None if it may still become one."""
        for tag in tags:
            if rest.startswith(tag):
                self._buffer = rest[len(tag) :]
                return tag
        if any(tag.startswith(rest) for tag in tags):
            self._buffer = rest
            return None
        raise _UnsureError

    def _read_content(self) -> bool:
        text, rest = self._upto_tag()
        if text:
            self._text(text)
        if not rest:
            self._buffer = ""
            return False
        if self._choose(rest, (TOOL_START,)) is None:
            return False
        self._tag(TOOL_START)
        # Whitespace before a call is not content (vLLM's parser drops it).
        self._spaces = ""
        self._start()
        self._state = _State.PREAMBLE
        return True

    def _text(self, text: str) -> None:
        if self._words:
            self._content.append(text)
        elif text.isspace():
            self._spaces += text
        elif self._index >= 0:
            # After a call vLLM's parser drops a piece of whitespace alone: what goes out
            # depends on how the text was cut into pieces. Its own to read.
            raise _UnsureError
        else:
            self._content.append(self._spaces + text)
            self._spaces, self._words = "", True

    def _start(self) -> None:
        self._index += 1
        self._name, self._keys = "", set()

    def _read_preamble(self) -> bool:
        _, rest = self._upto_tag()  # text here is nobody's (vLLM's parser drops it)
        if not rest:
            self._buffer = ""
            return False
        if self._choose(rest, (FUNCTION,)) is None:
            return False
        self._state = _State.NAME
        return True

    def _until_close(self) -> str | None:
        """The buffer up to its first `>` (consumed), or None (all held) if it has none."""
        close = self._buffer.find(">")
        opening = self._buffer.find("<")
        if opening >= 0 and (close < 0 or opening < close):
            raise _UnsureError
        if close < 0:
            return None
        head, self._buffer = self._buffer[:close], self._buffer[close + 1 :]
        return head

    def _read_name(self) -> bool:
        head = self._until_close()
        if head is None:
            self._name, self._buffer = self._name + self._buffer, ""
            return False
        self._name += head
        if not self._name:
            raise _UnsureError
        self._calls.append(CallDelta(self._index, None, self._name, None))
        self._state = _State.ARGUMENTS
        return True

    def _read_arguments(self) -> bool:
        text, rest = self._upto_tag()
        if text and not text.isspace():
            raise _UnsureError
        if not rest:
            self._buffer = ""
            return False
        tag = self._choose(rest, (PARAMETER, FUNCTION_END))
        if tag is None:
            return False
        if tag == PARAMETER:
            self._key, self._state = "", _State.KEY
        else:
            self._arguments('"}' if self._keys else "{}")
            self._state = _State.BETWEEN
        return True

    def _read_key(self) -> bool:
        head = self._until_close()
        if head is None:
            self._key, self._buffer = self._key + self._buffer, ""
            return False
        key = self._key + head
        if not key or key[0].isspace() or key in self._keys or not self._string(key):
            raise _UnsureError
        opening = '", ' if self._keys else "{"
        self._arguments(f'{opening}{json.dumps(key, ensure_ascii=False)}: "')
        self._keys.add(key)
        self._lead, self._held = True, ""
        self._state = _State.VALUE
        return True

    def _string(self, key: str) -> bool:
        """Whether vLLM's parser streams `key`'s value as the string it is: the tool's
        schema types it a plain string, or the tool has no properties."""
        properties = self._properties.get(self._name)
        if not properties:
            return True
        schema = properties.get(key)
        return (
            isinstance(schema, dict)
            and schema.get("type") == "string"
            and not any(k in schema for k in _CONVERTED)
        )

    def _read_value(self) -> bool:
        while True:
            text, rest = self._upto_tag()
            if text:
                self._value(text)
            if not rest:
                self._buffer = ""
                return False
            if rest.startswith(PARAMETER_END):
                self._buffer = rest[len(PARAMETER_END) :]
                self._held = ""  # the value's last newline is the template's
                self._state = _State.ARGUMENTS
                return True
            if PARAMETER_END.startswith(rest):
                self._buffer = rest  # the end tag, still coming
                return False
            head = _TAG_HEAD.match(rest)
            word = rest[head.end() :] if head else ""
            if not word:
                self._buffer = rest
                return False
            for tag_word in _TAG_WORDS:
                if word[: len(tag_word)] == tag_word[: len(word)]:
                    if len(word) < len(tag_word):
                        self._buffer = rest  # may still become a tag
                        return False
                    raise _UnsureError
            self._value("<")
            self._buffer = rest[1:]

    def _value(self, text: str) -> None:
        if self._lead:
            self._lead = False
            if text.startswith("\n"):
                text = text[1:]
        text = self._held + text
        if text.endswith("\n"):
            text, self._held = text[:-1], "\n"
        else:
            self._held = ""
        if text:
            self._arguments(json.dumps(text, ensure_ascii=False)[1:-1])

    def _read_between(self) -> bool:
        _, rest = self._upto_tag()  # text here is nobody's (vLLM's parser drops it)
        if not rest:
            self._buffer = ""
            return False
        tag = self._choose(rest, (TOOL_END, TOOL_START, FUNCTION))
        if tag is None:
            return False
        if tag == FUNCTION:
            self._start()
            self._state = _State.NAME
            return True
        self._tag(tag)
        if tag == TOOL_START:
            self._start()
        self._state = _State.PREAMBLE if tag == TOOL_START else _State.CONTENT
        return True

    def _arguments(self, text: str) -> None:
        last = self._calls[-1] if self._calls else None
        if last is not None and last.index == self._index and last.name is None:
            self._calls[-1] = CallDelta(self._index, None, None, (last.arguments or "") + text)
        else:
            self._calls.append(CallDelta(self._index, None, None, text))
