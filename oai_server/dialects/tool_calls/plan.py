"""Decide how a chat request's `tools` and `tool_choice` are served.

`required` and a named function work on any model: decoding is constrained to the
JSON of the call(s), so the output always parses. `auto` needs a model trained to
call tools; its free text is parsed by the configured parser (`--tool-call-parser`).
Custom tools are offered as functions of one string (`custom.py`); `allowed_tools`
offers only the tools it names, in its own mode.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oai_server.dialects.gate import Markers, markers_of
from oai_server.dialects.tool_calls.custom import (
    INPUT_SCHEMA,
    CustomInputs,
    as_function,
    grammar_of,
)
from oai_server.dialects.tool_calls.own import streaming_parser
from oai_server.dialects.tool_calls.parsers import (
    ContentOnly,
    EngineCalls,
    HermesCalls,
    NamedFunction,
    OutputParser,
    RequiredCalls,
)
from oai_server.dialects.tool_calls.selection import ToolParsing
from oai_server.engine.parsing import OutputParsing
from oai_server.engine.types import StructuredOutput
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.structured.limits import check_schema
from schemas.chat import (
    AllowedToolChoice,
    AllowedTools,
    ChatCompletionCustomTool,
    ChatCompletionTool,
    CreateChatCompletionRequest,
    NamedToolChoice,
    NamedToolChoiceCustom,
    Tool,
    ToolChoice,
)


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


def _name(tool: Tool) -> str:
    return tool.custom.name if isinstance(tool, ChatCompletionCustomTool) else tool.function.name


def template_tool(tool: Tool) -> dict[str, Any]:
    """`tool` as the chat template (and the engine's parsers) are given it: a function."""
    if isinstance(tool, ChatCompletionCustomTool):
        return as_function(tool)
    return tool.model_dump(exclude_none=True)


def _required_schema(tools: list[Tool], parallel: bool) -> dict[str, Any]:
    """A JSON array of calls, each `{"name": <a tool>, "parameters": <its schema>}`."""
    items = [
        {
            "type": "object",
            "properties": {
                "name": {"const": _name(t)},
                "parameters": INPUT_SCHEMA
                if isinstance(t, ChatCompletionCustomTool)
                else _parameters(t),
            },
            "required": ["name", "parameters"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": items}}
    if not parallel:
        schema["maxItems"] = 1
    return schema


def forces_call(choice: ToolChoice) -> bool:
    """Whether `choice` makes the model call a tool (decoding constrained to the call)."""
    if isinstance(choice, AllowedToolChoice):
        return choice.allowed_tools.mode == "required"
    return choice == "required" or isinstance(choice, NamedToolChoice | NamedToolChoiceCustom)


def _allowed(tools: list[tuple[int, Tool]], allowed: AllowedTools) -> list[tuple[int, Tool]]:
    """The tools `allowed` names, each as `{"type": ..., <type>: {"name": ...}}`."""
    names: set[tuple[str, str]] = set()
    for j, entry in enumerate(allowed.tools):
        kind = entry.get("type")
        spec = entry.get(kind) if isinstance(kind, str) else None
        name = spec.get("name") if isinstance(spec, dict) else None
        if kind not in ("function", "custom") or not isinstance(name, str):
            raise InvalidRequestError(
                "Each of 'tool_choice.allowed_tools.tools' must be "
                '{"type": "function", "function": {"name": ...}} or '
                '{"type": "custom", "custom": {"name": ...}}.',
                param=f"tool_choice.allowed_tools.tools[{j}]",
            )
        if not any(t.type == kind and _name(t) == name for _, t in tools):
            raise InvalidRequestError(
                f"tool_choice.allowed_tools names the {kind} tool '{name}', which is not "
                "among 'tools'.",
                param=f"tool_choice.allowed_tools.tools[{j}]",
            )
        names.add((kind, name))
    return [(i, t) for i, t in tools if (t.type, _name(t)) in names]


def offered(tools: list[Tool], choice: AllowedToolChoice) -> list[Tool]:
    """The tools `choice` allows (a 400 for one it names that `tools` lacks)."""
    return [t for _, t in _allowed(list(enumerate(tools)), choice.allowed_tools)]


def _check_compiled(tools: list[tuple[int, Tool]], choice: ToolChoice) -> None:
    """Bound the schemas the grammar compiler will see: those `choice` forces, and strict
    tools'. A schema only shown to the model is bounded by the body size alone."""
    for i, tool in tools:
        if isinstance(tool, ChatCompletionCustomTool) or tool.function.parameters is None:
            continue
        named = isinstance(choice, NamedToolChoice) and choice.function.name == _name(tool)
        if choice == "required" or named or tool.function.strict:
            check_schema(tool.function.parameters, f"tools[{i}].function.parameters")


@functools.lru_cache(maxsize=64)  # one per model served: few
def markers_of_parsing(parsing: OutputParsing) -> Markers:
    """Where the markers of `parsing`'s family can be (worked out once per model)."""
    return markers_of(parsing.added_tokens(), parsing.name)


# Most requests: no tools, the same plan every time.
_NO_TOOLS = ToolPlan(ContentOnly)


def _named(choice: NamedToolChoice | NamedToolChoiceCustom, tools: list[Tool]) -> Tool:
    kind = choice.type
    name = choice.function.name if isinstance(choice, NamedToolChoice) else choice.custom.name
    named = next((t for t in tools if t.type == kind and _name(t) == name), None)
    if named is None:
        raise InvalidRequestError(
            f"tool_choice names the {kind} tool '{name}', which is not among 'tools'.",
            param="tool_choice",
        )
    return named


def plan_tools(req: CreateChatCompletionRequest, parsing: ToolParsing) -> ToolPlan:
    """The plan for `req` on a model whose tool calls `parsing` reads (for `auto`); raises a
    400 for inconsistent tool settings."""
    if req.functions or req.function_call is not None:
        raise UnsupportedParameterError(
            "'functions' and 'function_call' are deprecated; use 'tools' and 'tool_choice'.",
            param="functions" if req.functions else "function_call",
        )
    indexed = list(enumerate(req.tools or []))
    choice = req.tool_choice if req.tool_choice is not None else ("auto" if indexed else "none")
    if choice != "none" and not indexed:
        raise InvalidRequestError(
            "'tool_choice' is only allowed when 'tools' are specified.", param="tool_choice"
        )
    if choice == "none":
        return _NO_TOOLS
    if isinstance(choice, AllowedToolChoice):
        indexed = _allowed(indexed, choice.allowed_tools)
        choice = choice.allowed_tools.mode
    _check_compiled(indexed, choice)
    tools = [t for _, t in indexed]
    template_tools = [template_tool(t) for t in tools]
    if isinstance(choice, NamedToolChoice | NamedToolChoiceCustom):
        named = _named(choice, tools)
        if isinstance(named, ChatCompletionCustomTool):
            name = named.custom.name
            return ToolPlan(
                lambda: NamedFunction(name, custom=True), grammar_of(named), template_tools
            )
        function = named.function.name
        return ToolPlan(
            lambda: NamedFunction(function),
            StructuredOutput(json_schema=_parameters(named)),
            template_tools,
        )
    customs = frozenset(t.custom.name for t in tools if isinstance(t, ChatCompletionCustomTool))

    def reading(make: Callable[[], OutputParser]) -> Callable[[], OutputParser]:
        """`make`, its custom tools' calls read as such."""
        return (lambda: CustomInputs(make(), customs)) if customs else make

    if choice == "required":
        schema = _required_schema(tools, req.parallel_tool_calls is not False)
        return ToolPlan(
            reading(RequiredCalls), StructuredOutput(json_schema=schema), template_tools
        )
    parallel = req.parallel_tool_calls is not False
    engine_parsing = parsing.parsing
    if engine_parsing is not None:
        # vLLM's parsers are given the tools as the template is: functions only.
        request = req.model_dump(mode="json", exclude_none=True)
        request.update(tools=template_tools, tool_choice="auto")
        markers = markers_of_parsing(engine_parsing)
        return ToolPlan(
            reading(
                lambda: EngineCalls(
                    streaming_parser(engine_parsing, request, markers),
                    whole=False,
                    parallel=parallel,
                    markers=markers,
                )
            ),
            None,
            template_tools,
            parsing.name,
            keep_special_tokens=True,
            make_whole=reading(
                lambda: EngineCalls(engine_parsing.new(request), whole=True, parallel=parallel)
            ),
        )
    if not parsing.builtin:
        raise UnsupportedParameterError(
            f"tool_choice 'auto' needs a tool-call parser ({parsing.refusal}); start the "
            "server with --tool-call-parser auto or a parser's name.",
            param="tool_choice",
        )
    return ToolPlan(reading(HermesCalls), None, template_tools, parsing.name)
