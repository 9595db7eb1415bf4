"""OpenAI's Realtime API over a WebSocket, its text subset, on the chat service.

`router` (the socket and its limits), `session` (one conversation's events), `responder`
(chat events -> Realtime events), `conversation` (its items). `feature` wires it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oai_server.features import Feature
from oai_server.realtime import router

if TYPE_CHECKING:
    from oai_server.state import ServerState

__all__ = ["feature"]


def feature(state: ServerState) -> Feature[None]:
    """The `/v1/realtime` socket; each session ends with its connection."""
    return Feature(None, router.router.routes)
