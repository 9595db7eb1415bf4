"""A Responses request as the chat request the chat service serves.

Validation of what is Responses-specific happens here; everything else (the model
name, sampling ranges, tools against `tool_choice`, structured output, the context
length) is the chat service's, so both endpoints refuse the same things the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.items.context import to_messages
from oai_server.items.tools import chat_tools
from oai_server.responses.items import to_context
from oai_server.responses.tools import offered_tools, tool_choice
from schemas.chat import CreateChatCompletionRequest
from schemas.common import ResponseFormat, StreamOptions
from schemas.response_items import Item
from schemas.responses import CreateResponse, InputTokensRequest, TextConfig

# `include` values that ask for nothing this server produces (no built-in tools ran, an
# image's URL is kept in its item anyway): accepted, since there is nothing they would add.
HARMLESS_INCLUDES = frozenset(
    {
        "file_search_call.results",
        "web_search_call.results",
        "web_search_call.action.sources",
        "code_interpreter_call.outputs",
        "computer_call_output.output.image_url",
        "message.input_image.image_url",
    }
)


# The `include` value that asks for the output text's token logprobs.
LOGPROBS_INCLUDE = "message.output_text.logprobs"
# The `include` value that asks for each reasoning item's text, sealed with the server's
# secret, for a client that keeps the conversation itself (`store: false`).
ENCRYPTED_REASONING = "reasoning.encrypted_content"
SERVED_INCLUDES = HARMLESS_INCLUDES | {LOGPROBS_INCLUDE, ENCRYPTED_REASONING}


def _unsupported(param: str, what: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(f"{what} is not supported by this server.", param=param)


def reject_unsupported(req: CreateResponse | InputTokensRequest) -> None:
    """Refuse what would change the answer but cannot be served; never ignore it silently.

    `reasoning.summary` is not among them: no summary is written (reasoning items carry
    their text as `content` and an empty `summary`), which changes no answer."""
    if req.previous_response_id is not None and req.conversation is not None:
        raise InvalidRequestError(
            "'previous_response_id' and 'conversation' cannot both be given.",
            param="previous_response_id",
        )
    if isinstance(req, InputTokensRequest):
        return
    if req.prompt is not None:
        raise _unsupported("prompt", "Prompt templates ('prompt')")
    for value in req.include or ():
        if value not in SERVED_INCLUDES:
            raise _unsupported("include", f"include '{value}'")


def response_format(text: TextConfig | None) -> ResponseFormat | None:
    """`text.format` as chat's `response_format`."""
    fmt = text.format if text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return ResponseFormat(type="json_object")
    if fmt.schema_ is None:
        raise InvalidRequestError(
            "text.format 'json_schema' needs 'schema', a JSON Schema object.",
            param="text.format.schema",
        )
    spec: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.schema_}
    if fmt.strict is not None:
        spec["strict"] = fmt.strict
    return ResponseFormat(type="json_schema", json_schema=spec)


def chat_request(
    req: CreateResponse | InputTokensRequest,
    items: Sequence[Item],
    files: Mapping[str, str] | None = None,
) -> CreateChatCompletionRequest:
    """The chat request for `req` answering after the context `items` (`files`: the URL
    of each image file they name)."""
    messages = to_messages(req.instructions, to_context(items, files))
    if not messages:
        raise InvalidRequestError("The request has no input.", param="input")
    offered = offered_tools(req.tools)
    tools = chat_tools(offered.tools, tool_choice(req.tool_choice, offered))
    chat = CreateChatCompletionRequest(
        model=req.model,
        messages=messages,
        tools=tools.tools,
        tool_choice=tools.tool_choice,
        parallel_tool_calls=req.parallel_tool_calls,
        response_format=response_format(req.text),
    )
    if isinstance(req, CreateResponse):
        chat.max_completion_tokens = req.max_output_tokens
        if req.temperature is not None:
            chat.temperature = req.temperature
        if req.top_p is not None:
            chat.top_p = req.top_p
        # `top_logprobs` alone asks for logprobs as plainly as the `include` value does.
        if LOGPROBS_INCLUDE in (req.include or ()) or req.top_logprobs is not None:
            chat.logprobs = True
            chat.top_logprobs = req.top_logprobs or 0
        chat.reasoning_effort = req.reasoning.effort if req.reasoning is not None else None
        if req.presence_penalty is not None:
            chat.presence_penalty = req.presence_penalty
        if req.frequency_penalty is not None:
            chat.frequency_penalty = req.frequency_penalty
        chat.prompt_cache_key = req.prompt_cache_key
        chat.cache_salt = req.cache_salt
        # The tier served (the route resolved it; never `ultrafast`): the engine priority.
        if req.service_tier is not None and req.service_tier != "ultrafast":
            chat.service_tier = req.service_tier
        chat.stream = True
        chat.stream_options = StreamOptions(include_usage=False)
    return chat
