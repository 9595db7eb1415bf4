"""Compaction: the history before a point, summarised by the model and sealed in one item.

`POST /v1/responses/compact` (or `context_management` with a `compact_threshold`, when a
request's input passes it) has the model summarise the history under `INSTRUCTION`, and
returns the history's user messages, kept word for word, then one `compaction` item: the
summary, sealed with the server's secret (AES-GCM, so a client can neither read nor alter
it). A later request that carries the item is served with, in place of everything before
it, the user messages before it and the summary as an assistant message (`opened`); the
same holds for a chain rebuilt from the store, so a compaction in it cuts it too.
"""

from __future__ import annotations

from collections.abc import Sequence

from oai_server.errors import InvalidRequestError
from oai_server.ids import new_id
from oai_server.secret import BrokenSealError, ServerSecret
from schemas.response_items import (
    CompactionItem,
    InputTextContent,
    Item,
    MessageItem,
    OutputTextContent,
)
from schemas.responses import CompactionInput, CreateResponse

# What the server secret seals a compaction's summary under.
COMPACTION_SEAL = "responses.compaction.encrypted_content"

# Our instruction to the model, as the last user message of the summarising pass.
INSTRUCTION = (
    "Summarise the conversation above so that it can continue from your summary alone. "
    "Keep every fact, decision, name, identifier, number, tool result and open task that "
    "later turns may need; leave out greetings and repetition. Write only the summary."
)
# How the summary is put to the model in place of the history it stands for.
SUMMARY_INTRO = "Summary of the conversation so far:\n"
# The most tokens a summary may take.
SUMMARY_MAX_TOKENS = 1024


def compaction_item(summary: str, secret: ServerSecret) -> CompactionItem:
    """The item that stands for the summarised history."""
    sealed = secret.seal(COMPACTION_SEAL, summary)
    return CompactionItem(id=new_id("cmp"), encrypted_content=sealed)


def _summary(item: CompactionItem, param: str, secret: ServerSecret) -> str:
    try:
        return secret.unseal(COMPACTION_SEAL, item.encrypted_content)
    except BrokenSealError:
        raise InvalidRequestError(
            f"The compaction item's 'encrypted_content' ({param}) was not made by this server, "
            "or was altered: send it back as /v1/responses/compact returned it.",
            param=f"{param}.encrypted_content",
        ) from None


def received(item: CompactionInput, param: str, secret: ServerSecret) -> CompactionItem:
    """A compaction item a client sent back; a 400 unless this server sealed it unaltered."""
    compaction = CompactionItem(
        id=item.id or new_id("cmp"), encrypted_content=item.encrypted_content
    )
    _summary(compaction, param, secret)
    return compaction


def user_messages(items: Sequence[Item]) -> list[Item]:
    """The user messages of `items`: what a compaction keeps word for word."""
    return [item for item in items if isinstance(item, MessageItem) and item.role == "user"]


def opened(items: Sequence[Item], secret: ServerSecret) -> list[Item]:
    """`items` as the model is to see them: the last compaction item, and everything before
    it but the user messages, become its summary, as an assistant message."""
    last = max((i for i, item in enumerate(items) if isinstance(item, CompactionItem)), default=-1)
    if last < 0:
        return list(items)
    compaction = items[last]
    assert isinstance(compaction, CompactionItem)
    summary = _summary(compaction, "input", secret)
    said = MessageItem(
        id=compaction.id,
        role="assistant",
        status="completed",
        content=[OutputTextContent(text=SUMMARY_INTRO + summary)],
    )
    return [*user_messages(items[:last]), said, *items[last + 1 :]]


def summarising(
    model: str, instructions: str | None, like: CreateResponse | None = None
) -> CreateResponse:
    """The request of the summarising pass (greedy, so one history gives one summary);
    `like`, the turn it compacts for, already shaped for its caller: the pass runs at its
    service tier and in its key's prefix cache."""
    return CreateResponse(
        model=model,
        instructions=instructions,
        max_output_tokens=SUMMARY_MAX_TOKENS,
        temperature=0,
        store=False,
        truncation="auto",  # a history too long to read whole is summarised from its end
        service_tier=None if like is None else like.service_tier,
        cache_salt=None if like is None else like.cache_salt,
    )


def instruction() -> MessageItem:
    """Our instruction, the last message the summarising pass reads."""
    return MessageItem(
        id=new_id("msg"),
        role="user",
        status="completed",
        content=[InputTextContent(text=INSTRUCTION)],
    )


def threshold(req: CreateResponse) -> int | None:
    """The request's `context_management` compaction threshold, in tokens; None if none."""
    limits = [
        entry.compact_threshold
        for entry in req.context_management or ()
        if entry.type == "compaction" and entry.compact_threshold is not None
    ]
    return min(limits, default=None)
