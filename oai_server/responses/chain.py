"""What a Responses WebSocket remembers: the latest response's whole context, on the socket.

WebSocket mode continues a response from memory, not from the store, so `store: false`
chains (Codex sends `store: false`) continue too and a turn reads nothing back. As
OpenAI's server does, a socket keeps only its most recent response: continuing an older
one, or any one after a reconnect, is `previous_response_not_found` unless the store has
it (`store: true`). A continuation that fails forgets the response it named, so a client
retrying the same turn starts over rather than build on a state it cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oai_server.errors import InvalidRequestError, NotFoundError
from oai_server.responses.items import to_items
from oai_server.responses.service import ResponsesService
from oai_server.responses.translate import reject_unsupported
from schemas.response_items import (
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
)
from schemas.responses import CreateResponse, InputTokensRequest

PREVIOUS = "previous_response_id"


def previous_response_not_found(response_id: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"Previous response with id '{response_id}' not found: a WebSocket keeps its latest "
        "response only, and a 'store: false' one is lost with its socket. Send the whole "
        "input again without 'previous_response_id'.",
        param=PREVIOUS,
        code="previous_response_not_found",
    )


@dataclass
class Chain:
    """The socket's latest response: its id and every item up to and including its output."""

    response_id: str | None = None
    items: Sequence[Item] = ()

    def get(self, response_id: str) -> Sequence[Item] | None:
        return self.items if response_id == self.response_id else None

    def keep(self, response_id: str, items: Sequence[Item]) -> None:
        self.response_id, self.items = response_id, items

    def forget(self, response_id: str) -> None:
        if response_id == self.response_id:
            self.response_id, self.items = None, ()


def check_outputs_answer_calls(earlier: Sequence[Item], inputs: Sequence[Item]) -> None:
    """A tool output must answer a call of the chain's (or of this input): an output for
    no call is the client's mistake, which the model would otherwise read as history."""
    calls = {
        item.call_id
        for item in (*earlier, *inputs)
        if isinstance(item, FunctionCallItem | CustomToolCallItem)
    }
    for item in inputs:
        if not isinstance(item, FunctionCallOutputItem | CustomToolCallOutputItem):
            continue
        if item.call_id not in calls:
            raise InvalidRequestError(
                f"No tool call found for function call output with call_id '{item.call_id}'.",
                param="input",
            )


@dataclass
class SocketResponses(ResponsesService):
    """The Responses service with one more place to find a previous response: the socket."""

    chain: Chain | None = None
    # The items before this request's input, once `context` has found them.
    earlier: Sequence[Item] = ()

    async def context(
        self, req: CreateResponse | InputTokensRequest
    ) -> tuple[list[Item], list[Item]]:
        previous = req.previous_response_id
        held = None if previous is None or self.chain is None else self.chain.get(previous)
        if previous is not None and held is None:
            if self.state is None:  # the store would be asked; there is none
                raise previous_response_not_found(previous)
            try:
                earlier, inputs = await super().context(req)
            except NotFoundError as exc:
                if exc.param != PREVIOUS:
                    raise
                raise previous_response_not_found(previous) from None
        elif held is not None:
            reject_unsupported(req)
            known = {item.id for item in held}
            earlier = list(held)
            inputs = [item for item in to_items(req.input, self.secret) if item.id not in known]
        else:
            earlier, inputs = await super().context(req)
        check_outputs_answer_calls(earlier, inputs)
        self.earlier = earlier
        return earlier, inputs
