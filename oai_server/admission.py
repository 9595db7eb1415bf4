"""The admission step: what every request passes before it reaches an engine.

In this order, each refusal before the engine sees the request:

1. refused while the drain cuts the server's requests (`close`): a request started after
   the drain aborted what was in flight would run on an engine about to stop;
2. its tokens reserved against the caller's token limit (`reserve`, the rate limits'), or
   refused with a 429: the prompt plus all it may generate;
3. room made for it (`make_room`, the batch runner's hand-back): the batch lines beyond
   their small cap leave the chat engine before it arrives.

The chat engine admits each generation through `admit` (`InstrumentedEngine.submit` calls
it first); the pooling services (embeddings, rerank, score), whose engine is another,
through `admit_pooling`, which also counts the prompt on the request's record. Built once
by `create_app`, before the engine it guards; both hooks are its constructor's arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from oai_server.errors import ServerShuttingDownError
from oai_server.observability.context import RequestRecord, current_request

# Reserves a request's tokens (at most: prompt plus the requested maximum) against the
# limit of the caller of `RequestRecord`; raises `RateLimitError` to refuse it.
Reserve = Callable[[RequestRecord | None, int], Awaitable[None]]
# Hands back what must leave the chat engine before a request reaches it.
MakeRoom = Callable[[], Awaitable[None]]


class Admission:
    """Admits requests to the engines: refuses them once closed, reserves their tokens
    with `reserve`, and has `make_room` clear the chat engine for each generation."""

    def __init__(self, reserve: Reserve | None = None, make_room: MakeRoom | None = None) -> None:
        self.reserve = reserve
        self.make_room = make_room
        self.closed = False

    async def admit(self, record: RequestRecord | None, tokens: int) -> None:
        """Admit a generation, which may use `tokens` tokens at most, to the chat engine;
        raise to refuse it."""
        if self.closed:
            raise _shutting_down()
        if self.reserve is not None:
            await self.reserve(record, tokens)
        if self.make_room is not None:
            await self.make_room()

    async def admit_pooling(self, prompt_tokens: int, model: str) -> None:
        """Admit a pooling request (embeddings, scores: on the embedding model's engine,
        which no batch line shares with the chat): reserve its `prompt_tokens` (or refuse) and
        count them, and its `model`, on the request's record."""
        if self.closed:
            raise _shutting_down()
        record = current_request.get()
        if self.reserve is not None:
            await self.reserve(record, prompt_tokens)
        if record is not None:
            record.prompt_tokens += prompt_tokens
            record.model = model

    def close(self) -> None:
        """Refuse every request from now on: the drain is cutting those in flight."""
        self.closed = True


def _shutting_down() -> ServerShuttingDownError:
    return ServerShuttingDownError("The server is shutting down; retry elsewhere.")
