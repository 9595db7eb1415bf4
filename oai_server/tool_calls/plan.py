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
    HermesCalls,
    NamedFunction,
    OutputParser,
    RequiredCalls,
)
from schemas.chat import ChatCompletionTool, CreateChatCompletionRequest, NamedToolChoice

PARSERS: dict[str, Callable[[], OutputParser]] = {"hermes": HermesCalls}


@dataclass(frozen=True)
class ToolPlan:
    """What the chat service needs: a parser per choice, a grammar, tools for the template."""

    make_parser: Callable[[], OutputParser]
    structured: StructuredOutput | None = None
    template_tools: list[dict[str, Any]] | None = None


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


def plan_tools(req: CreateChatCompletionRequest, parser: str) -> ToolPlan:
    """The plan for `req`; raises a 400 for inconsistent tool settings."""
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
        return ToolPlan(ContentOnly)
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
    if parser not in PARSERS:
        raise UnsupportedParameterError(
            "tool_choice 'auto' needs a tool-call parser; start the server with "
            f"--tool-call-parser (one of: {', '.join(PARSERS)}).",
            param="tool_choice",
        )
    return ToolPlan(PARSERS[parser], None, template_tools)
