"""Our own streaming parsers, where vLLM's costs too much a piece: by the vLLM parser
they stand in for. Each reads what it is sure of as vLLM's parser would and hands the
rest to vLLM's (`replay.py`); a whole answer is always vLLM's to read.

- `qwen3_coder` (Qwen3-Coder's XML calls): `qwen3_coder.Qwen3CoderCalls`.
"""

from __future__ import annotations

import functools
from typing import Any

from oai_server.dialects.gate import Markers
from oai_server.dialects.tool_calls.qwen3_coder import Qwen3CoderCalls
from oai_server.engine.parsing import OutputParsing, OutputTextParser


def streaming_parser(
    parsing: OutputParsing, request: dict[str, Any], markers: Markers
) -> OutputTextParser:
    """The streaming parser of one choice of `request` on a model whose calls `parsing`
    (vLLM's parser) reads: our own for its family if we have one, else vLLM's."""
    make = functools.partial(parsing.new, request)
    if parsing.name == "qwen3_coder":
        tools = request.get("tools") or []
        return Qwen3CoderCalls(make, tools, parsing.added_tokens(), markers.ids)
    return make()
