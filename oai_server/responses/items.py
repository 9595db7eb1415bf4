"""Responses items: what a client sends, as stored items, and as the chat's context.

Every item a response sees, whether sent now, rebuilt from `previous_response_id` or
read from a conversation, is first made one of the stored `Item` shapes (with an id and
a status), then into the neutral context items (`oai_server.items.context`) whose chat
messages the model's template renders. So an
earlier turn's function calls and their outputs reach the model the same way, whether
the client sent them back or the server remembered them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter

from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.ids import new_id
from oai_server.items.context import Call, CallOutput, ContextItem, Said, Thought
from oai_server.responses.compaction import received
from oai_server.responses.tools import qualified
from oai_server.secret import BrokenSealError, ServerSecret
from schemas.response_items import (
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImageContent,
    InputTextContent,
    Item,
    MessageItem,
    OutputTextContent,
    ReasoningItem,
    ReasoningTextContent,
    SummaryTextContent,
)
from schemas.responses import (
    CompactionInput,
    CustomToolCallInput,
    CustomToolCallOutputInput,
    FunctionCallInput,
    FunctionCallOutputInput,
    InputImagePart,
    InputItem,
    InputMessage,
    InputPart,
    InputTextPart,
    ReasoningInput,
)

ITEM = TypeAdapter[Item](Item)

# What the server secret seals a reasoning item's text under (`reasoning.encrypted_content`).
REASONING_SEAL = "responses.reasoning.encrypted_content"


def seal_reasoning(secret: ServerSecret, item: ReasoningItem) -> str:
    """The item's reasoning text, sealed for a client to send back in a later turn."""
    return secret.seal(REASONING_SEAL, "".join(part.text for part in item.content))


def _texts(parts: Sequence[InputPart], param: str) -> list[str]:
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, InputTextPart | InputImagePart):
            raise UnsupportedParameterError(
                f"Content of type '{part.type}' is not supported by this model; only text is.",
                param=param,
            )
        if isinstance(part, InputTextPart):
            texts.append(part.text)
    return texts


def _images(parts: str | Sequence[InputPart], role: str, param: str) -> list[InputImageContent]:
    """A user message's images, as the stored item keeps them (by URL or file id)."""
    if isinstance(parts, str):
        return []
    images = []
    for j, part in enumerate(parts):
        if not isinstance(part, InputImagePart):
            continue
        if role != "user":
            raise UnsupportedParameterError(
                "Images are taken in user messages only.", param=f"{param}[{j}]"
            )
        if (part.image_url is None) == (part.file_id is None):
            raise InvalidRequestError(
                "An 'input_image' needs exactly one of 'image_url' and 'file_id'.",
                param=f"{param}[{j}]",
            )
        images.append(
            InputImageContent(
                image_url=part.image_url, file_id=part.file_id, detail=part.detail or "auto"
            )
        )
    return images


def _message(item: InputMessage, param: str) -> MessageItem:
    texts = [item.content] if isinstance(item.content, str) else _texts(item.content, param)
    content: list[InputTextContent | InputImageContent | OutputTextContent]
    if item.role == "assistant":
        content = [OutputTextContent(text=t) for t in texts]
    else:
        content = [*_images(item.content, item.role, param)]
        content += [InputTextContent(text=t) for t in texts]
    message = MessageItem(
        id=item.id or new_id("msg"),
        role=item.role,
        status=item.status or "completed",
        content=content,
    )
    if item.phase is not None and item.role == "assistant":  # not used on others' messages
        message.phase = item.phase
    return message


def _reasoning(item: ReasoningInput, param: str, secret: ServerSecret) -> ReasoningItem:
    """An earlier turn's reasoning; its text (or, lacking one, its summary's, or what its
    `encrypted_content` seals) goes back to the model's template as vLLM's Responses sends it."""
    content = [ReasoningTextContent(text=p.text) for p in item.content or ()]
    if item.encrypted_content is not None:
        try:
            opened = secret.unseal(REASONING_SEAL, item.encrypted_content)
        except BrokenSealError:
            raise InvalidRequestError(
                f"The reasoning item's 'encrypted_content' ({param}) was not made by this "
                "server, or was altered: send it back as this server returned it.",
                param=f"{param}.encrypted_content",
            ) from None
        content = [ReasoningTextContent(text=opened)]
    reasoning = ReasoningItem(
        id=item.id or new_id("rs"),
        summary=[SummaryTextContent(text=p.text) for p in item.summary],
        content=content,
        status=item.status or "completed",
    )
    if item.encrypted_content is not None:
        reasoning.encrypted_content = item.encrypted_content
    return reasoning


def _output(output: str | list[InputPart], param: str) -> str | list[dict[str, Any]]:
    """A call's output as stored: its text, or its text parts."""
    if isinstance(output, str):
        return output
    return [{"type": "input_text", "text": t} for t in _texts(output, param)]


def to_item(item: InputItem, index: int, secret: ServerSecret) -> Item:
    """One input item in its stored shape; items the model cannot take raise a 400
    (`secret` opens reasoning sent back sealed)."""
    param = f"input[{index}]"
    if isinstance(item, InputMessage):
        return _message(item, f"{param}.content")
    if isinstance(item, FunctionCallInput):
        call = FunctionCallItem(
            id=item.id or new_id("fc"),
            call_id=item.call_id,
            name=item.name,
            arguments=item.arguments,
            status=item.status or "completed",
        )
        if item.namespace is not None:
            call.namespace = item.namespace
        return call
    if isinstance(item, CustomToolCallInput):
        custom = CustomToolCallItem(
            id=item.id or new_id("ctc"),
            call_id=item.call_id,
            name=item.name,
            input=item.input,
            status="completed",
        )
        if item.namespace is not None:
            custom.namespace = item.namespace
        return custom
    if isinstance(item, FunctionCallOutputInput):
        return FunctionCallOutputItem(
            id=item.id or new_id("fco"),
            call_id=item.call_id,
            output=_output(item.output, param),
            status=item.status or "completed",
        )
    if isinstance(item, CustomToolCallOutputInput):
        return CustomToolCallOutputItem(
            id=item.id or new_id("ctco"),
            call_id=item.call_id,
            output=_output(item.output, param),
            status="completed",
        )
    if isinstance(item, ReasoningInput):
        return _reasoning(item, param, secret)
    if isinstance(item, CompactionInput):
        return received(item, param, secret)
    raise UnsupportedParameterError(
        f"Input items of type '{item.type}' are not supported by this server; it takes "
        "messages, function and custom tool calls and their outputs, 'reasoning' and "
        "'compaction' items.",
        param=param,
    )


def to_items(input_: str | Sequence[InputItem] | None, secret: ServerSecret) -> list[Item]:
    """The request's `input` as stored items, each with a fresh id where it had none
    (`secret` opens reasoning sent back sealed)."""
    if input_ is None:
        return []
    if isinstance(input_, str):
        return [
            MessageItem(
                id=new_id("msg"),
                role="user",
                status="completed",
                content=[InputTextContent(text=input_)],
            )
        ]
    items = [to_item(item, i, secret) for i, item in enumerate(input_)]
    seen: set[str] = set()
    for i, item in enumerate(items):
        # Item ids key the stored items: a repeated one (a client sending an item twice)
        # gets a fresh id rather than failing the write.
        if item.id in seen:
            items[i] = item.model_copy(update={"id": new_id(item.id.split("_", 1)[0])})
        seen.add(items[i].id)
    return items


def _output_text(output: str | list[dict[str, Any]]) -> str:
    if isinstance(output, str):
        return output
    return "".join(str(part.get("text", "")) for part in output)


def image_files(items: Sequence[Item]) -> list[str]:
    """The ids of the uploaded files the items' images are, in order, once each."""
    ids = [
        part.file_id
        for item in items
        if isinstance(item, MessageItem)
        for part in item.content
        if isinstance(part, InputImageContent) and part.file_id is not None
    ]
    return list(dict.fromkeys(ids))


def to_context(items: Sequence[Item], files: Mapping[str, str] | None = None) -> list[ContextItem]:
    """The items as the chat's context sees them (`oai_server.items.context`); `files`
    gives the URL (a `data:` URL of its bytes) of each image file the items name. A
    compaction item says nothing here: `compaction.opened` has put its summary in its place."""
    out: list[ContextItem] = []
    for item in items:
        if isinstance(item, MessageItem):
            text = "".join(p.text for p in item.content if not isinstance(p, InputImageContent))
            images = tuple(
                p.image_url or (files or {}).get(p.file_id or "", "")
                for p in item.content
                if isinstance(p, InputImageContent)
            )
            out.append(Said(item.role, text, images, item.phase))
        elif isinstance(item, FunctionCallItem):
            name = qualified(item.namespace, item.name)
            out.append(Call(item.call_id, name, item.arguments))
        elif isinstance(item, CustomToolCallItem):
            name = qualified(item.namespace, item.name)
            out.append(Call(item.call_id, name, item.input, custom=True))
        elif isinstance(item, ReasoningItem):
            parts = item.content or item.summary
            out.append(Thought(parts[0].text if parts else ""))
        elif isinstance(item, FunctionCallOutputItem | CustomToolCallOutputItem):
            out.append(CallOutput(item.call_id, _output_text(item.output)))
    return out
