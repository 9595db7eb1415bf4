"""The Responses API (`/v1/responses`) and the Conversations API (`/v1/conversations`).

Built on the chat service's events (as the Realtime socket is) and kept on the store:
`items` (Responses items <-> chat messages), `translate` (the request as a chat
request), `stream` (chat events -> Responses events), `service` (one response, start to
stored), `state` (responses and conversations on the store), `sse` (the event framing),
`routes` and `conversations` (the HTTP endpoints).
"""

from __future__ import annotations

from fastapi import APIRouter

from oai_server.responses import conversations, routes

router = APIRouter()
router.include_router(routes.router)
router.include_router(conversations.router)
