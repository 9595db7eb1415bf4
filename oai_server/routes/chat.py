"""`POST /v1/chat/completions`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.routing import Route

from oai_server.auth.caller import caller
from oai_server.auth.salt import salted
from oai_server.http.answer import GenerationService, answer
from oai_server.http.parsing import parse_body
from oai_server.services.metadata import check_metadata
from oai_server.state import server_state
from schemas.chat import CreateChatCompletionRequest


async def create_chat_completion(request: Request) -> Response:
    server = server_state(request)
    req = await parse_body(request, CreateChatCompletionRequest, server.settings.max_request_bytes)
    check_metadata(req.metadata)  # OpenAI's limits hold whether or not it is stored
    req = salted(request, req, shared=server.settings.prefix_cache_shared)
    req = server.tiers.apply(req, caller(request.scope))
    # A completion to be stored is the engine's answer, never the cache's (see oai_server/cache).
    store = server.store
    recorded = None if store is None else store.recording(request, req, server.chat)
    service: GenerationService[CreateChatCompletionRequest, Any, Any] = server.chat
    if recorded is not None:
        service = recorded
    elif server.cache is not None:
        service = server.cache.chat(request)
    return await answer(request, req, service)


# A plain Starlette route: the handler takes the request alone, and FastAPI's dependency
# solving (parsing the query string, headers and cookies for it) cost more per request
# than the route's own work before the engine, on the busiest route. The app answers it
# directly (`oai_server.http.direct`), past Starlette's router.
ROUTE = Route("/v1/chat/completions", create_chat_completion, methods=["POST"])
router = APIRouter(routes=[ROUTE])
