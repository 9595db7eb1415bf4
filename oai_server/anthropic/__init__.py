"""Anthropic's Messages API: `/v1/messages` and `/v1/messages/count_tokens`.

On the engine path chat, Responses and Realtime share, in process: `translate` (a
Messages request as conversation items, then a chat request), `stream` (the chat
service's item events as Anthropic's stream events, and the whole message as their
fold), `sse` (the event framing, with pings), `routes`. Its errors come out in
Anthropic's envelope (`oai_server.error_responses`), its keys as `x-api-key` or
`Authorization: Bearer` (`oai_server.auth`); `GET /v1/models` answers in Anthropic's
list shape to a request that carries `anthropic-version` (`oai_server.routes.models`).
"""

from __future__ import annotations

from oai_server.anthropic import routes
from oai_server.features import Feature
from oai_server.http.answering import Answering
from oai_server.state import ServerState

__all__ = ["feature"]


def feature(core: ServerState, answering: Answering) -> Feature[None]:
    """The routes; they answer through the app's answering chain (the response cache when it
    is on) on the core's chat service, and keep nothing of their own."""
    return Feature(None, routes.routes(core, answering))
