"""Turn an OpenAI conversation into prompt token ids with the model's chat template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from oai_server.dialects.tool_calls.custom import as_function_call
from oai_server.dialects.tool_calls.plan import forces_call
from oai_server.dialects.tool_calls.prompt import with_tools_prompt
from oai_server.engine.protocol import Tokenizer
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.generation.translated import TranslatedChatRequest
from oai_server.media.loader import ImageRef
from schemas.chat import (
    ChatMessage,
    Content,
    CreateChatCompletionRequest,
    CustomToolCall,
    ImageContentPart,
    RefusalContentPart,
    TextContentPart,
)


def load_template(path: Path | None) -> str | None:
    """Read a `--chat-template` file; None keeps the model's own template."""
    return path.read_text() if path is not None else None


def _content(content: Content | None, index: int) -> str | list[dict[str, Any]] | None:
    """Text parts joined into one string, as OpenAI does for text; a content with images
    stays a list of parts (`{"type": "image"}` where each image goes), which the
    tokenizer renders as the model's template wants it (`engine/chat_content.py`)."""
    if content is None or isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    texts: list[str] = []
    for part in content:
        if isinstance(part, TextContentPart | RefusalContentPart):
            text = part.text if isinstance(part, TextContentPart) else part.refusal
            texts.append(text)
            parts.append({"type": "text", "text": text})
        elif isinstance(part, ImageContentPart):
            parts.append({"type": "image"})
        else:
            raise UnsupportedParameterError(
                f"Content parts of type '{part.type}' are not supported; "
                "only 'text' and 'image_url' parts are.",
                param=f"messages[{index}].content",
            )
    if len(parts) == len(texts):
        return "".join(texts)
    return parts


def image_refs(req: CreateChatCompletionRequest) -> list[ImageRef]:
    """The images of `req`'s messages, in prompt order, each named by its part
    (`messages[0].content[1]`, or as a translated request names it)."""
    messages = req.messages
    refs: list[ImageRef] = []
    i = -1
    for message in messages:  # on every request: no call for a text message
        i += 1
        content = message.content
        if content.__class__ is str or content is None:
            continue
        for j, part in enumerate(content):
            if isinstance(part, ImageContentPart):
                refs.append(ImageRef(param=f"messages[{i}].content[{j}]", url=part.image_url.url))
    if isinstance(req, TranslatedChatRequest) and req.image_params:
        named = zip(refs, req.image_params, strict=True)
        refs = [ImageRef(param=param, url=ref.url) for ref, param in named]
    return refs


def prompt_chars(messages: list[ChatMessage]) -> int:
    """The characters of text in `messages`: what their rendering and tokenizing cost
    grows with (a template's own text is small beside a long prompt)."""
    size = 0
    for message in messages:
        content = message.content
        if isinstance(content, str):
            size += len(content)
        elif content is not None:
            size += sum(len(part.text) for part in content if isinstance(part, TextContentPart))
    return size


def to_template_message(message: ChatMessage, index: int) -> dict[str, Any]:
    """One message as chat templates expect it (`role`, `content` as a string, ...)."""
    # An assistant turn that only called tools has no content; templates concatenate
    # content as a string, so it becomes "" rather than None.
    out: dict[str, Any] = {"role": message.role, "content": _content(message.content, index) or ""}
    name = getattr(message, "name", None)
    if name:
        out["name"] = name
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    if message.role == "assistant" and message.tool_calls:
        # A custom tool's call as the call of the function the tool is shown as.
        out["tool_calls"] = [
            as_function_call(call) if isinstance(call, CustomToolCall) else call.model_dump()
            for call in message.tool_calls
        ]
    if message.role == "assistant" and message.reasoning is not None:
        # Under both names, as vLLM passes it: templates read one or the other.
        out["reasoning"] = out["reasoning_content"] = message.reasoning
    if message.role == "assistant" and message.phase is not None:
        out["phase"] = message.phase
    return out


def render_prompt(
    req: CreateChatCompletionRequest,
    tokenizer: Tokenizer,
    chat_template: str | None,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Prompt token ids for a chat request."""
    return encode_prompt(render_prompt_text(req, tokenizer, chat_template, tools), tokenizer)


def encode_prompt(text: str, tokenizer: Tokenizer) -> list[int]:
    """The token ids of a rendered prompt: the template already wrote any special tokens
    (BOS) it wants."""
    return tokenizer.encode(text, add_special_tokens=False)


def render_prompt_text(
    req: CreateChatCompletionRequest,
    tokenizer: Tokenizer,
    chat_template: str | None,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The prompt of a chat request, rendered by the chat template."""
    messages = [to_template_message(m, i) for i, m in enumerate(req.messages)]
    continue_final = bool(req.continue_final_message)
    add_generation_prompt = req.add_generation_prompt
    if add_generation_prompt is None:
        add_generation_prompt = not continue_final
    if continue_final and add_generation_prompt:
        raise InvalidRequestError(
            "continue_final_message and add_generation_prompt cannot both be true.",
            param="continue_final_message",
        )
    if continue_final and messages[-1]["role"] != "assistant":
        raise InvalidRequestError(
            "continue_final_message needs the last message to be from the assistant.",
            param="continue_final_message",
        )

    kwargs = req.chat_template_kwargs if req.reasoning_effort is None else template_kwargs(req)

    def apply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        return tokenizer.apply_chat_template(
            messages,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final,
            chat_template=chat_template,
            tools=tools,
            template_kwargs=kwargs,
        )

    try:
        text = apply(messages, tools)
        if tools and text == apply(messages, None):
            # The template ignores `tools`: the model would never see them.
            call_format = not forces_call(req.tool_choice)
            text = apply(with_tools_prompt(messages, tools, call_format), None)
    except (jinja2.TemplateError, ValueError, TypeError, KeyError) as exc:
        # Templates raise for conversations they refuse, e.g. roles out of order.
        raise InvalidRequestError(
            f"The chat template rejected the messages: {exc}", param="messages"
        ) from exc
    return text


def template_kwargs(req: CreateChatCompletionRequest) -> dict[str, Any] | None:
    """What the template is given beside the messages, as vLLM gives it: the request's
    `chat_template_kwargs`, and its `reasoning_effort` (with `enable_thinking` unless set:
    off for effort "none"), over them."""
    effort = req.reasoning_effort
    if effort is None:
        return req.chat_template_kwargs
    kwargs = dict(req.chat_template_kwargs or {})
    kwargs.setdefault("enable_thinking", effort != "none")
    kwargs["reasoning_effort"] = effort
    return kwargs
