"""`POST /v1/chat/completions`."""

from __future__ import annotations

from fastapi import Request, Response
from starlette.routing import Route

from oai_server.caller import caller
from oai_server.generation.for_caller import ForCaller
from oai_server.http.answer import answer
from oai_server.http.answering import Answering
from oai_server.http.parsing import parse_body
from oai_server.services.common import FORCED_USAGE
from oai_server.services.metadata import check_metadata
from schemas.chat import CreateChatCompletionRequest


def route(
    answering: Answering, for_caller: ForCaller, max_request_bytes: int, force_usage: bool
) -> Route:
    """The route, answering through `answering` (the app's chain: store, cache, service)
    each body of at most `max_request_bytes`, shaped `for_caller`; `force_usage`
    (`--enable-force-include-usage`): every stream reports its usage.

    A plain Starlette route: the handler takes the request alone, and FastAPI's dependency
    solving (parsing the query string, headers and cookies for it) cost more per request
    than the route's own work before the engine, on the busiest route. The app answers it
    directly (`oai_server.http.direct`), past Starlette's router.
    """

    async def create_chat_completion(request: Request) -> Response:
        req = await parse_body(request, CreateChatCompletionRequest, max_request_bytes)
        check_metadata(req.metadata)  # OpenAI's limits hold whether or not it is stored
        if force_usage and req.stream:
            req.stream_options = FORCED_USAGE
        req = for_caller(req, caller(request.scope))
        return await answer(request, req, answering.chat(request, req))

    return Route("/v1/chat/completions", create_chat_completion, methods=["POST"])
