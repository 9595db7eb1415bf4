"""Anthropic's Messages API: `/v1/messages` and `/v1/messages/count_tokens`.

On the engine path chat, Responses and Realtime share, in process: `translate` (a
Messages request as conversation items, then a chat request; `documents` reads text
documents and search results as text), `stream` (the chat
service's item events as Anthropic's stream events, and the whole message as their
fold), `sse` (the event framing, with pings), `routes`, `batches` (Message Batches, on the
Batch API's runner). The feature brings the core its own wire shapes: its
errors come out in Anthropic's envelope on the paths under `/v1/messages` (`errors`,
through `oai_server.error_responses`), and `GET /v1/models` answers in Anthropic's list
shape to a request that carries `anthropic-version` (`models`). Its keys come as
`x-api-key` or `Authorization: Bearer` (`oai_server.auth`).
"""

from __future__ import annotations

from oai_server.anthropic import batches, routes
from oai_server.anthropic.batches import MessagesEndpoint
from oai_server.anthropic.errors import ERROR_SHAPE
from oai_server.anthropic.models import MODEL_LIST
from oai_server.batch import BatchRunner
from oai_server.features import Feature
from oai_server.http.answering import Answering
from oai_server.state import ServerState
from oai_server.store.service import StoreService

__all__ = ["feature"]


def feature(
    core: ServerState, answering: Answering, store: StoreService, runner: BatchRunner | None
) -> Feature[None]:
    """The routes; they answer through the app's answering chain (the response cache when it
    is on) on the core's chat service, and keep nothing of their own. With the Batch API's
    `runner` (a store with a database), Message Batches too: it adds its `/v1/messages`
    endpoint to the runner, whose lines Message Batches and the Batch API both run."""
    mounted = routes.routes(core, answering)
    if runner is not None:
        runner.add_endpoint(batches.URL, MessagesEndpoint(core))
        mounted += batches.routes(store, runner, runner.traces.created).routes
    return Feature(None, mounted, error_shapes=[ERROR_SHAPE], model_list=MODEL_LIST)
