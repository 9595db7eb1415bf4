"""OpenAI's Realtime API over a WebSocket, its text subset, on the chat service.

`router` (the socket and its limits), `session` (one conversation's events), `responder`
(chat events -> Realtime events), `conversation` (its items). `feature` wires it in.
"""

from __future__ import annotations

from oai_server.features import Feature
from oai_server.realtime import router
from oai_server.realtime.router import Settle
from oai_server.state import ServerState

__all__ = ["feature"]


def feature(core: ServerState, settle: Settle | None) -> Feature[None]:
    """The `/v1/realtime` socket, on the core's chat service; each session ends with its
    connection, its unused tokens given back through `settle` (None: no token limit)."""
    return Feature(None, router.router(core.chat, core.models, core.settings, settle).routes)
