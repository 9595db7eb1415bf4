"""A Messages request as the chat request the engine path takes, in process.

Anthropic's turns become the neutral conversation items Responses and Realtime use
(`oai_server.items.context`), so an earlier turn's `tool_use` and its `tool_result` reach
the model's template as any other API's function calls do; the chat service then
validates, renders, and limits the prompt as it does every chat request's.

Thinking, as `vllm serve` maps it: `output_config.effort` is chat's `reasoning_effort`,
`disabled` is `reasoning_effort: "none"` (so `enable_thinking` is off for templates that
have the switch), `enabled` turns the switch on (`budget_tokens` is checked against
`max_tokens`, not enforced: the engine has no thinking budget here). An earlier turn's
`thinking` block goes back to the template as that turn's reasoning (the template keeps or
drops it) unless a `clear_thinking_20251015` edit clears it; `redacted_thinking` is opaque
and left out. What is accepted and not acted on: docs/api/compatibility.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from oai_server.anthropic.documents import block_text
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.generation.translated import TranslatedChatRequest
from oai_server.items.context import Call, CallOutput, ContextItem, Said, Thought, to_messages
from oai_server.items.tools import Choice, NamedTool, ToolDefinition, chat_tools
from schemas.anthropic import (
    ClearThinkingEdit,
    CountTokensRequest,
    DocumentBlockParam,
    ImageBlockParam,
    MessageParam,
    MessagesRequest,
    SearchResultBlockParam,
    System,
    TextBlockParam,
    ThinkingBlockParam,
    ThinkingDisabled,
    ThinkingEnabled,
    ThinkingTurns,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from schemas.common import ResponseFormat, ServiceTier, StreamOptions

# Anthropic's tiers as OpenAI's: `standard_only` is the default tier, never priority.
_TIERS: dict[str, ServiceTier] = {"auto": "auto", "standard_only": "default"}


def _no_images(param: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(
        "Images in tool results and in assistant turns are not supported; images are "
        "taken in user turns.",
        param=param,
    )


def _image_url(block: ImageBlockParam, param: str) -> str:
    """An image block's source as a URL: `base64` as a `data:` URL, `url` as it is."""
    source = block.source
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str):
        media_type = source.get("media_type") or "application/octet-stream"
        return f"data:{media_type};base64,{source['data']}"
    if kind == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    raise InvalidRequestError(
        "An image block's source must be {'type': 'base64', 'media_type', 'data'} or "
        "{'type': 'url', 'url'}.",
        param=f"{param}.source",
    )


def system_text(system: System) -> str | None:
    """`system` as one text: its blocks joined as `vllm serve` joins them."""
    if system is None or isinstance(system, str):
        return system or None
    return "".join(block.text for block in system) or None


def _result_text(block: ToolResultBlockParam, param: str) -> str:
    if block.content is None or isinstance(block.content, str):
        return block.content or ""
    texts: list[str] = []
    for j, part in enumerate(block.content):
        if isinstance(part, TextBlockParam):
            texts.append(part.text)
        elif isinstance(part, DocumentBlockParam | SearchResultBlockParam):
            texts.append(block_text(part, f"{param}.content[{j}]"))
        else:
            raise _no_images(f"{param}.content[{j}]")
    return "\n".join(texts)


def _turn(message: MessageParam, param: str, thinking: bool = True) -> Iterator[ContextItem]:
    """The items of one message: its text (its text blocks joined), calls and results;
    its thinking unless `thinking` is false (cleared by a context-management edit)."""
    role = message.role
    if isinstance(message.content, str):
        yield Said(role, message.content)
        return
    texts: list[str] = []
    images: list[str] = []
    for j, block in enumerate(message.content):
        where = f"{param}.content[{j}]"
        if isinstance(block, TextBlockParam):
            if block.text:
                texts.append(block.text)
        elif isinstance(block, ImageBlockParam) and role == "user":
            images.append(_image_url(block, where))
        elif isinstance(block, DocumentBlockParam | SearchResultBlockParam):
            texts.append(block_text(block, where))
        elif isinstance(block, ToolUseBlockParam):
            if texts:
                yield Said(role, "\n".join(texts))
                texts = []
            yield Call(block.id, block.name, json.dumps(block.input))
        elif isinstance(block, ToolResultBlockParam):
            # Anthropic's client sends a call's results first in its next user turn.
            yield CallOutput(block.tool_use_id, _result_text(block, where))
        elif isinstance(block, ThinkingBlockParam) and role == "assistant":
            if thinking:
                yield Thought(block.thinking)
        elif block.type == "image":
            raise _no_images(where)
        # `redacted_thinking` of earlier turns: opaque, not part of the prompt.
    if texts or images:
        yield Said(role, "\n".join(texts), tuple(images))


def _thinking_turns_kept(req: CountTokensRequest) -> int | None:
    """How many of the latest assistant turns keep their thinking (None: all), as a
    `clear_thinking_20251015` edit asks: by default the latest one."""
    edits = req.context_management.edits if req.context_management is not None else None
    for edit in edits or ():
        if isinstance(edit, ClearThinkingEdit):
            if edit.keep is None:
                return 1
            return edit.keep.value if isinstance(edit.keep, ThinkingTurns) else None
    return None


def _items(req: CountTokensRequest) -> list[ContextItem]:
    kept = _thinking_turns_kept(req)
    turns = [i for i, message in enumerate(req.messages) if message.role == "assistant"]
    cleared = set() if kept is None else set(turns[: max(0, len(turns) - kept)])
    users = [i for i, message in enumerate(req.messages) if message.role == "user"]
    items: list[ContextItem] = []
    for i, message in enumerate(req.messages):
        if message.clear_at == "next_user_message" and users and users[-1] > i:
            continue  # a system message for the turn it preceded only
        items += _turn(message, f"messages[{i}]", thinking=i not in cleared)
    return items


def _image_params(req: CountTokensRequest) -> list[str]:
    """The part of `req` each image of its chat request comes from, in order
    (`messages[1].content[0]`): the chat request's own indices are shifted by `system`."""
    return [
        f"messages[{i}].content[{j}]"
        for i, message in enumerate(req.messages)
        if message.role == "user" and not isinstance(message.content, str)
        for j, block in enumerate(message.content)
        if isinstance(block, ImageBlockParam)
    ]


def _tool_choice(req: CountTokensRequest, offered: bool) -> tuple[Choice, bool | None]:
    """The neutral choice and chat's `parallel_tool_calls` for Anthropic's `tool_choice`,
    with client tools `offered` or not (Anthropic's own tools are not: forcing one is a
    400)."""
    choice = req.tool_choice
    if choice is None:
        return None, None
    if isinstance(choice, ToolChoiceNone):
        return "none", None
    parallel = choice.disable_parallel_tool_use
    parallel = None if parallel is None else not parallel
    own = {tool.name: tool.type for tool in req.tools or () if tool.type not in (None, "custom")}
    if isinstance(choice, ToolChoiceAuto):
        return "auto", parallel
    if isinstance(choice, ToolChoiceAny):
        if not offered and own:
            raise _forced_own(next(iter(own.values())))
        return "required", parallel
    if choice.name in own:
        raise _forced_own(own[choice.name])
    return NamedTool(choice.name), parallel


def _forced_own(kind: str | None) -> UnsupportedParameterError:
    return UnsupportedParameterError(
        f"tool_choice forces Anthropic's tool '{kind}', which this server cannot run; "
        "such tools are accepted in 'tools' but not offered to the model.",
        param="tool_choice",
    )


def _tools(req: CountTokensRequest) -> list[ToolDefinition]:
    """The client tools, as neutral function tools. Anthropic's own tools (server tools
    such as `web_search_20250305`, and schema-less ones such as `bash_20250124`) run on
    Anthropic's side or have no schema here: accepted, not offered."""
    out: list[ToolDefinition] = []
    for i, tool in enumerate(req.tools or ()):
        if tool.type not in (None, "custom"):
            continue
        if tool.input_schema is None:
            raise InvalidRequestError(
                f"tools.{i}.input_schema: Field required", param=f"tools[{i}].input_schema"
            )
        out.append(ToolDefinition(tool.name, tool.description, tool.input_schema))
    return out


def _thinking(req: CountTokensRequest, chat: TranslatedChatRequest) -> None:
    """`thinking` and `output_config.effort` onto the template's switches, as `vllm serve`
    maps them: the effort is chat's `reasoning_effort`; `disabled` wins over it."""
    effort = req.output_config.effort if req.output_config is not None else None
    if isinstance(req.thinking, ThinkingDisabled):
        chat.reasoning_effort = "none"
    elif effort is not None:
        chat.reasoning_effort = effort
    if isinstance(req.thinking, ThinkingEnabled):
        chat.chat_template_kwargs = {"enable_thinking": True}


def _check_messages_only(req: MessagesRequest) -> None:
    """Refuse what would be answered wrongly: a budget past `max_tokens`, no answer at all,
    a summary asked for in place of an answer, a conversation held elsewhere."""
    if isinstance(req.thinking, ThinkingEnabled) and req.thinking.budget_tokens >= req.max_tokens:
        raise InvalidRequestError(
            "`max_tokens` must be greater than `thinking.budget_tokens`.", param="max_tokens"
        )
    if req.max_tokens == 0:
        raise UnsupportedParameterError(
            "`max_tokens: 0` (warming the prompt cache without an answer) is not supported "
            "by this server; its engine caches a prompt's prefix when it answers it.",
            param="max_tokens",
        )
    if req.compaction is not None:
        raise UnsupportedParameterError(
            "Compaction requests are not supported by this server.", param="compaction"
        )
    if req.thread is not None and req.thread.type == "continue":
        raise UnsupportedParameterError(
            "This server holds no threads: send the whole conversation in `messages`.",
            param="thread",
        )


def chat_request(req: CountTokensRequest) -> TranslatedChatRequest:
    """The chat request `req` stands for: streamed, with its usage at the end."""
    messages = to_messages(system_text(req.system), _items(req))
    if not messages:
        raise InvalidRequestError("The request has no messages.", param="messages")
    tools = _tools(req)
    choice, parallel = _tool_choice(req, bool(tools))
    offered = chat_tools(tools, choice)
    chat = TranslatedChatRequest(
        model=req.model,
        messages=messages,
        tools=offered.tools,
        tool_choice=offered.tool_choice,
        parallel_tool_calls=parallel,
    ).name_images(_image_params(req))
    _thinking(req, chat)
    output_format = req.output_config.format if req.output_config is not None else None
    output_format = output_format or req.output_format
    if output_format is not None:
        schema = {"name": "output", "schema": output_format.schema_, "strict": True}
        chat.response_format = ResponseFormat(type="json_schema", json_schema=schema)
    if isinstance(req, MessagesRequest):
        _check_messages_only(req)
        # Assigned, not validated again: Anthropic allows more stop sequences than OpenAI.
        chat.max_completion_tokens = req.max_tokens
        chat.stop = req.stop_sequences or None
        chat.temperature = req.temperature
        chat.top_p = req.top_p
        chat.top_k = req.top_k
        chat.user = req.metadata.user_id if req.metadata is not None else None
        chat.service_tier = None if req.service_tier is None else _TIERS[req.service_tier]
        chat.stream = True
        chat.stream_options = StreamOptions(include_usage=True)
    return chat
