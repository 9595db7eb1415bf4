"""The tools a model is offered, whichever API carries them, as a chat request's.

Anthropic's Messages, Responses and Realtime each read their own `tools` and
`tool_choice` into these neutral ones, in one small function of their own, leaving out
what this server cannot run (hosted and server tools: accepted, not offered, and a
choice that forces one refused there). `chat_tools` then gives the chat request's
`tools` and `tool_choice` in one place, so the three offer a tool the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from schemas.chat import (
    AllowedToolChoice,
    AllowedTools,
    ChatCompletionCustomTool,
    ChatCompletionTool,
    CustomToolProperties,
    FunctionDefinition,
    Grammar,
    GrammarFormat,
    NamedToolChoice,
    NamedToolChoiceCustom,
    NamedToolChoiceFunction,
    Tool,
    ToolChoice,
)

ToolKind = Literal["function", "custom"]


@dataclass(frozen=True, slots=True)
class ToolGrammar:
    """What a custom tool's input must match: a Lark grammar or a regular expression."""

    syntax: Literal["lark", "regex"]
    definition: str


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool offered to the model, under the name its calls come back with."""

    name: str
    description: str | None = None
    # A function's arguments, as a JSON schema (a custom tool's input is text).
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    kind: ToolKind = "function"
    # A custom tool's input grammar (None: free text).
    grammar: ToolGrammar | None = None


@dataclass(frozen=True, slots=True)
class NamedTool:
    """One tool, by name: the one a choice forces, or one of those it allows."""

    name: str
    kind: ToolKind = "function"


@dataclass(frozen=True, slots=True)
class AllowedToolsChoice:
    """Only these tools are offered; `required`: one of them must be called."""

    mode: Literal["auto", "required"]
    tools: tuple[NamedTool, ...]


Choice = Literal["none", "auto", "required"] | NamedTool | AllowedToolsChoice | None


class ChatTools(NamedTuple):
    """A chat request's `tools` and `tool_choice`."""

    tools: list[Tool] | None
    tool_choice: ToolChoice


def _tool(tool: ToolDefinition) -> Tool:
    if tool.kind == "function":
        definition = FunctionDefinition(
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            strict=tool.strict,
        )
        return ChatCompletionTool(type="function", function=definition)
    fmt = None
    if tool.grammar is not None:
        grammar = Grammar(definition=tool.grammar.definition, syntax=tool.grammar.syntax)
        fmt = GrammarFormat(type="grammar", grammar=grammar)
    custom = CustomToolProperties(name=tool.name, description=tool.description, format=fmt)
    return ChatCompletionCustomTool(type="custom", custom=custom)


def _entry(named: NamedTool) -> dict[str, Any]:
    return {"type": named.kind, named.kind: {"name": named.name}}


def _choice(choice: Choice) -> ToolChoice:
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, AllowedToolsChoice):
        allowed = AllowedTools(mode=choice.mode, tools=[_entry(t) for t in choice.tools])
        return AllowedToolChoice(type="allowed_tools", allowed_tools=allowed)
    name = NamedToolChoiceFunction(name=choice.name)
    if choice.kind == "custom":
        return NamedToolChoiceCustom(type="custom", custom=name)
    return NamedToolChoice(type="function", function=name)


def chat_tools(tools: Sequence[ToolDefinition], choice: Choice) -> ChatTools:
    """The chat request's `tools` and `tool_choice` for `tools` offered under `choice`.
    With no tool offered, `auto` is no choice at all (as none was given); whatever else
    the choice asks is left to the chat service to refuse, as for any chat request."""
    if not tools and choice == "auto":
        choice = None
    return ChatTools([_tool(tool) for tool in tools] or None, _choice(choice))
