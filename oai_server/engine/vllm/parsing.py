"""vLLM's tool-call parsers (`vllm.tool_parsers`), behind `engine/parsing.py`'s interface.

A parser is driven as `vllm serve`'s chat handler drives it: through vLLM's `Parser`
(`ParserManager.get_parser`, one per choice), `parse_delta` for each streamed piece and
`parse` for a whole answer, so what a client gets is what `vllm serve --tool-call-parser
NAME --enable-auto-tool-choice` gives. vllm is imported inside the functions (seconds).

vLLM's parsers read token ids as well as text (to spot a marker token): the engine's ids
of each piece, or where it gives none the tokenizer's encoding of the text (for a marker
that is one special token, that token).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from oai_server.engine.parsing import CallDelta, OutputParsing, OutputTextParser, ParsedDelta
from oai_server.ids import new_call_id


@functools.cache
def tool_parser_names() -> tuple[str, ...]:
    """Every name in vLLM's tool-parser registry (plugins imported so far included)."""
    from vllm.tool_parsers import ToolParserManager

    return tuple(ToolParserManager.list_registered())


def import_tool_parser_plugin(path: str) -> None:
    """Register the parsers of the plugin file at `path`, as `--tool-parser-plugin` does."""
    from vllm.tool_parsers import ToolParserManager

    ToolParserManager.import_tool_parser(path)
    tool_parser_names.cache_clear()


class VLLMOutputParsing(OutputParsing):
    """vLLM's parser `name` over `tokenizer` (a Hugging Face tokenizer); raises
    `ValueError` if the tokenizer lacks the tokens the parser needs."""

    def __init__(self, name: str, tokenizer: Any) -> None:
        from vllm.parser import ParserManager

        self.name = name
        self._tokenizer = tokenizer
        try:
            self._cls: Any = ParserManager.get_parser(
                tool_parser_name=name, enable_auto_tools=True, tokenizer=tokenizer
            )
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        if self._cls is None:
            raise ValueError(f"no tool-call parser '{name}'")
        self._added = added_tokens(tokenizer)

    def added_tokens(self) -> Mapping[str, int]:
        return self._added

    def new(self, request: dict[str, Any]) -> OutputTextParser:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        vllm_request = ChatCompletionRequest.model_validate(_request_fields(request))
        parser = self._cls(self._tokenizer, vllm_request.tools)
        return _VLLMTextParser(parser, vllm_request, self._tokenizer)


def _request_fields(request: dict[str, Any]) -> dict[str, Any]:
    """What vLLM's parsers read of a request: its messages (Kimi counts earlier calls),
    tools, tool choice and parallel calls; the rest is the server's business."""
    keys = ("model", "messages", "tools", "tool_choice", "parallel_tool_calls")
    return {key: request[key] for key in keys if request.get(key) is not None}


class _VLLMTextParser(OutputTextParser):
    def __init__(self, parser: Any, request: Any, tokenizer: Any) -> None:
        self._parser = parser
        self._request = request
        self._tokenizer = tokenizer
        self._started: set[int] = set()

    def feed(self, text: str, token_ids: Sequence[int], *, finished: bool) -> ParsedDelta | None:
        ids = list(token_ids)
        if text and not ids:
            ids = self._tokenizer.encode(text, add_special_tokens=False)
        # The prompt tells a reasoning parser whether thinking is open at the start; with
        # none (tool calls only) the tool phase starts at once, whatever the prompt.
        message = self._parser.parse_delta(
            text, ids, self._request, prompt_token_ids=[], finished=finished
        )
        if finished and self._parser.tool_parser is not None and self._started:
            # vLLM appends arguments parsed but not streamed only to a last delta that
            # carries a call; at an empty last piece it would drop them.
            rest = self._parser.tool_parser.get_remaining_unstreamed_args()
            if rest and not (message is not None and message.tool_calls):
                calls = [CallDelta(max(self._started), arguments=rest)]
                return ParsedDelta(message.content if message else None, calls)
        if message is None:
            return None
        calls = []
        for call in message.tool_calls:
            function = call.function
            name = function.name if function is not None else None
            if name is not None:
                self._started.add(call.index)
            arguments = function.arguments if function is not None else None
            calls.append(CallDelta(call.index, call.id, name, arguments))
        return ParsedDelta(message.content, calls)

    def whole(self, text: str) -> ParsedDelta:
        ids = self._tokenizer.encode(text, add_special_tokens=False)
        _, content, calls = self._parser.parse(
            text, self._request, enable_auto_tools=True, model_output_token_ids=ids
        )
        return ParsedDelta(
            content,
            [
                CallDelta(i, call.id or new_call_id(), call.name, call.arguments)
                for i, call in enumerate(calls or [])
            ],
        )


def added_tokens(tokenizer: Any) -> Mapping[str, int]:
    """The tokens `tokenizer`'s vocabulary adds, its special ones included, by text."""
    added = dict(getattr(tokenizer, "get_added_vocab", dict)())
    for token in getattr(tokenizer, "all_special_tokens", ()):
        added.setdefault(token, tokenizer.convert_tokens_to_ids(token))
    return added
