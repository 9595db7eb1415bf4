"""A Responses request's tools as the tools the model is offered (`oai_server.items.tools`
makes them the chat request's).

- `function` and `custom` tools are offered as they are (chat has both).
- A `namespace` tool's functions and custom tools are offered each under its qualified
  name, `<namespace>.<name>` (as harmony addresses a namespace's functions); a call of
  one is answered with its own `name` and the `namespace` field.
- Hosted tools (`web_search`, `file_search`, `code_interpreter`, `mcp`, ...) run on
  OpenAI's side: this server cannot run them, so they are accepted and not offered.
  A `tool_choice` that forces one is a 400, since the answer could not be what was asked.
- `allowed_tools` names tools by type and name; hosted ones among them are left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.items.tools import (
    AllowedToolsChoice,
    Choice,
    NamedTool,
    ToolDefinition,
    ToolGrammar,
)
from schemas.responses import (
    CustomTool,
    FunctionTool,
    GrammarInputFormat,
    NamespaceTool,
    OtherToolChoice,
    ToolChoiceAllowed,
    ToolChoiceCustom,
    ToolChoiceFunction,
)
from schemas.responses import Tool as ResponsesTool
from schemas.responses import ToolChoice as ResponsesToolChoice

# A chat tool's field, as the chat service names it: `tools[3].function.` or `tools[3].custom.`.
_CHAT_TOOL = re.compile(r"tools\[(\d+)\]\.(?:function|custom)")


def qualified(namespace: str | None, name: str) -> str:
    """The name a namespace's tool is offered (and called back) under."""
    return name if namespace is None else f"{namespace}.{name}"


@dataclass(frozen=True)
class OfferedTools:
    """The tools a request's tools come to, and how to name their calls back."""

    tools: list[ToolDefinition] = field(default_factory=list)
    # Offered name -> (namespace, name), for the tools of a namespace.
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Hosted tools sent, by type: accepted, not offered.
    hosted: frozenset[str] = frozenset()
    # Where each chat tool is in the request (`tools[1].tools[0]`), to name it in errors.
    params: list[str] = field(default_factory=list)

    def param(self, chat_param: str) -> str:
        """`chat_param` (`tools[0].function.parameters...`) as the request names it."""
        match = _CHAT_TOOL.match(chat_param)
        if match is None or int(match[1]) >= len(self.params):
            return chat_param
        return self.params[int(match[1])] + chat_param[match.end() :]

    def call_name(self, offered: str) -> tuple[str | None, str]:
        """The `namespace` (None: none) and `name` a call of `offered` is answered with."""
        found = self.namespaced.get(offered)
        return (None, offered) if found is None else found


def _definition(tool: FunctionTool | CustomTool, namespace: str | None) -> ToolDefinition:
    name = qualified(namespace, tool.name)
    if isinstance(tool, FunctionTool):
        return ToolDefinition(name, tool.description, tool.parameters, tool.strict)
    grammar = None
    if isinstance(tool.format, GrammarInputFormat):
        grammar = ToolGrammar(tool.format.syntax, tool.format.definition)
    return ToolDefinition(name, tool.description, kind="custom", grammar=grammar)


def offered_tools(tools: Sequence[ResponsesTool] | None) -> OfferedTools:
    """The tools `tools` are offered as (hosted ones left out)."""
    chat: list[ToolDefinition] = []
    namespaced: dict[str, tuple[str, str]] = {}
    hosted: set[str] = set()
    params: list[str] = []
    for i, tool in enumerate(tools or ()):
        if isinstance(tool, FunctionTool | CustomTool):
            chat.append(_definition(tool, None))
            params.append(f"tools[{i}]")
        elif isinstance(tool, NamespaceTool):
            for j, inner in enumerate(tool.tools):
                chat.append(_definition(inner, tool.name))
                params.append(f"tools[{i}].tools[{j}]")
                namespaced[qualified(tool.name, inner.name)] = (tool.name, inner.name)
        else:
            hosted.add(tool.type)
    return OfferedTools(chat, namespaced, frozenset(hosted), params)


def _forced_hosted(kind: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(
        f"tool_choice forces the hosted tool '{kind}', which this server cannot run; "
        "hosted tools are accepted in 'tools' but not offered to the model.",
        param="tool_choice",
    )


def _allowed_entry(entry: dict[str, Any], offered: OfferedTools) -> list[NamedTool]:
    """One `allowed_tools` entry as the tools it names: a namespace's tools each, none for
    a hosted tool."""
    kind, name = entry.get("type"), entry.get("name")
    if kind == "namespace" and isinstance(name, str):
        return [
            NamedTool(tool.name, tool.kind)
            for tool in offered.tools
            if offered.call_name(tool.name)[0] == name
        ]
    if kind in ("function", "custom") and isinstance(name, str):
        namespace = entry.get("namespace")
        full = qualified(namespace if isinstance(namespace, str) else None, name)
        return [NamedTool(full, "custom" if kind == "custom" else "function")]
    if kind in ("function", "custom", "namespace"):
        raise InvalidRequestError(
            f"An allowed tool of type '{kind}' needs its 'name'.",
            param="tool_choice.tools",
        )
    return []


def tool_choice(choice: ResponsesToolChoice | None, offered: OfferedTools) -> Choice:
    """The neutral choice for a Responses `tool_choice`, over the tools actually
    `offered`."""
    if choice is None or isinstance(choice, str):
        if choice == "required" and not offered.tools and offered.hosted:
            raise _forced_hosted(sorted(offered.hosted)[0])
        return choice
    if isinstance(choice, ToolChoiceFunction):
        return NamedTool(choice.name)
    if isinstance(choice, ToolChoiceCustom):
        return NamedTool(choice.name, "custom")
    if isinstance(choice, ToolChoiceAllowed):
        entries = [e for entry in choice.tools for e in _allowed_entry(entry, offered)]
        if not entries and choice.mode == "required":
            kinds = [str(e.get("type")) for e in choice.tools] or ["none"]
            raise _forced_hosted(kinds[0])
        if not entries:
            return "none"
        return AllowedToolsChoice(choice.mode, tuple(entries))
    assert isinstance(choice, OtherToolChoice)
    raise _forced_hosted(choice.type)


def echo_tool_choice(choice: ResponsesToolChoice | None) -> str | dict[str, Any]:
    """`tool_choice` as the response object repeats it."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    return choice.model_dump(exclude_none=True)


def echo_tool(tool: ResponsesTool) -> dict[str, Any]:
    """A tool as the response object repeats it (a function's `parameters` and `strict`
    always there, as OpenAI's are, and its `description`, as Open Responses requires: null
    where the request had none)."""
    if isinstance(tool, FunctionTool):
        out = tool.model_dump(exclude_none=True)
        for key in ("description", "parameters", "strict"):
            out.setdefault(key, None)
        return out
    return tool.model_dump(exclude_none=True)
