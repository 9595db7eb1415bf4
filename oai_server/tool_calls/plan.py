"""Decide how a chat request's `tools` and `tool_choice` are served.

`required` and a named function work on any model: decoding is constrained to the
JSON of the call(s), so the output always parses. `auto` needs a model trained to
call tools; its free text is parsed by the configured parser (`--tool-call-parser`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oai_server.engine.types import StructuredOutput
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.structured.limits import check_schema
from oai_server.tool_calls.parsers import (
    ContentOnly,
    EngineCalls,
    HermesCalls,
    NamedFunction,
    OutputParser,
    RequiredCalls,
)
from oai_server.tool_calls.selection import ToolParsing
from schemas.chat import ChatCompletionTool, CreateChatCompletionRequest, NamedToolChoice


@dataclass(frozen=True)
class ToolPlan:
    """What the chat service needs: a parser per choice (`make_whole`, where it differs:
    for an answer not streamed), a grammar, tools for the template, the parser's name."""

    make_parser: Callable[[], OutputParser]
    structured: StructuredOutput | None = None
    template_tools: list[dict[str, Any]] | None = None
    parser: str = ""
    # vLLM's parsers read markers that are special tokens: they must stay in the text.
    keep_special_tokens: bool = False
    make_whole: Callable[[], OutputParser] | None = None


# Keywords by which a schema says for itself which properties beyond its own it takes.
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def _parameters(tool: ChatCompletionTool) -> dict[str, Any]:
    """The schema a call's arguments are decoded against.

    A function's declared parameters are the complete set, as its signature means and
    OpenAI's strict mode enforces: JSON Schema's default (any other property allowed)
    let a small model write `{"input": 1, "output": 1}` for `f(input)`, or keys without
    end for a function without parameters. A schema that says otherwise is kept.
    """
    schema = tool.function.parameters or {"type": "object", "properties": {}}
    if any(k in schema for k in _OPEN_KEYWORDS) or schema.get("type", "object") != "object":
        return schema
    return {**schema, "additionalProperties": False}


def _required_schema(tools: list[ChatCompletionTool], parallel: bool) -> dict[str, Any]:
    """A JSON array of calls, each `{"name": <a tool>, "parameters": <its schema>}`."""
    items = [
        {
            "type": "object",
            "properties": {"name": {"const": t.function.name}, "parameters": _parameters(t)},
            "required": ["name", "parameters"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": items}}
    if not parallel:
        schema["maxItems"] = 1
    return schema


# Most requests: no tools, the same plan every time.
_NO_TOOLS = ToolPlan(ContentOnly)


def plan_tools(
    req: CreateChatCompletionRequest, parsing_of_model: Callable[[], ToolParsing]
) -> ToolPlan:
    """The plan for `req`; raises a 400 for inconsistent tool settings. The model's
    parsing is asked for only where `auto` needs it."""
    if req.functions or req.function_call is not None:
        raise UnsupportedParameterError(
            "'functions' and 'function_call' are deprecated; use 'tools' and 'tool_choice'.",
            param="functions" if req.functions else "function_call",
        )
    tools = req.tools or []
    for i, tool in enumerate(tools):
        if tool.function.parameters is not None:
            check_schema(tool.function.parameters, f"tools[{i}].function.parameters")
    choice = req.tool_choice if req.tool_choice is not None else ("auto" if tools else "none")
    if choice != "none" and not tools:
        raise InvalidRequestError(
            "'tool_choice' is only allowed when 'tools' are specified.", param="tool_choice"
        )
    if choice == "none":
        return _NO_TOOLS
    template_tools = [t.model_dump(exclude_none=True) for t in tools]
    if isinstance(choice, NamedToolChoice):
        named = next((t for t in tools if t.function.name == choice.function.name), None)
        if named is None:
            raise InvalidRequestError(
                f"tool_choice names '{choice.function.name}', which is not among 'tools'.",
                param="tool_choice",
            )
        return ToolPlan(
            lambda: NamedFunction(named.function.name),
            StructuredOutput(json_schema=_parameters(named)),
            template_tools,
        )
    if choice == "required":
        schema = _required_schema(tools, req.parallel_tool_calls is not False)
        return ToolPlan(RequiredCalls, StructuredOutput(json_schema=schema), template_tools)
    parallel = req.parallel_tool_calls is not False
    parsing = parsing_of_model()
    engine_parsing = parsing.parsing
    if engine_parsing is not None:
        request = req.model_dump(mode="json", exclude_none=True)
        return ToolPlan(
            lambda: EngineCalls(engine_parsing.new(request), whole=False, parallel=parallel),
            None,
            template_tools,
            parsing.name,
            keep_special_tokens=True,
            make_whole=lambda: EngineCalls(
                engine_parsing.new(request), whole=True, parallel=parallel
            ),
        )
    if not parsing.builtin:
        raise UnsupportedParameterError(
            f"tool_choice 'auto' needs a tool-call parser ({parsing.refusal}); start the "
            "server with --tool-call-parser auto or a parser's name.",
            param="tool_choice",
        )
    return ToolPlan(HermesCalls, None, template_tools, parsing.name)
