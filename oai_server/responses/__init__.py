"""The Responses API (`/v1/responses`) and the Conversations API (`/v1/conversations`).

Built on the chat service's events (as the Realtime socket is) and kept on the store:
`items` (Responses items <-> chat messages), `compaction` (a history summarised into
one sealed item, and opened again), `translate` (the request as a chat request),
`stream` (chat events -> Responses events), `service` (one response, start to stored),
`state` (responses and conversations on the store), `background` (responses generated
after their request returned), `sse` (the event framing), `routes` and `conversations`
(the HTTP endpoints), `websocket` and `chain` (WebSocket mode on the same path).
`feature` wires it into the app.
"""

from __future__ import annotations

from oai_server.features import Feature
from oai_server.responses import conversations, routes, websocket
from oai_server.responses.background import BackgroundRuns
from oai_server.responses.websocket import TakeRequest
from oai_server.state import ServerState
from oai_server.store.service import StoreService

__all__ = ["feature"]


def feature(
    core: ServerState, store: StoreService | None, take_request: TakeRequest | None = None
) -> Feature[BackgroundRuns | None]:
    """The routes, and the background responses (which need the store): created with the
    app, and stopped at shutdown with every run stored as it ended. A socket's turns after
    the first count against the caller's request limit through `take_request` (None: none)."""
    kept = routes.Kept(store, core.replica)
    runs = None if store is None else BackgroundRuns(core.engine.abort_all)
    endpoints = [
        *routes.router(core, kept, runs).routes,
        *websocket.router(core, store, take_request).routes,
        *conversations.router(core.settings, core.secret, kept).routes,
    ]
    if runs is None:
        return Feature(None, endpoints)
    return Feature(runs, endpoints, stop=runs.stop)
