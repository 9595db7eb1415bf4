"""`POST /v1/responses`, `GET|DELETE /v1/responses/{id}`, `GET .../input_items`,
`POST /v1/responses/input_tokens`, `POST /v1/responses/compact`. Stored responses are the
caller's own only."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from fastapi import APIRouter, Request, Response

from oai_server.caller import caller
from oai_server.errors import InvalidRequestError
from oai_server.http.answer import answer, json_response
from oai_server.http.disconnect import until_disconnect
from oai_server.http.parsing import parse_body
from oai_server.responses.background import BackgroundRuns
from oai_server.responses.service import ResponsesService
from oai_server.responses.sse import RESPONSES, frames_stream
from oai_server.responses.state import (
    RESPONSE,
    ResponseState,
    response_not_found,
    wire_item,
)
from oai_server.state import ServerState
from oai_server.store.interface import ListQuery
from oai_server.store.params import list_object, list_query
from oai_server.store.service import StoreService, owner_of
from schemas.responses import (
    CompactRequest,
    CreateResponse,
    InputTokens,
    InputTokensRequest,
    ResponseDeleted,
    ResponseItemList,
)
from schemas.responses import Response as ResponseObject


@dataclass(frozen=True)
class Kept:
    """Where this server keeps responses and conversations (`store` None: nowhere)."""

    store: StoreService | None
    # The Ray Serve replica answering (None outside Ray), recorded with each response.
    replica: str | None = None

    def of(self, request: Request) -> ResponseState | None:
        """The store as `request`'s caller sees it; None on a server that keeps nothing."""
        if self.store is None:
            return None
        return ResponseState(self.store, owner_of(request), self.replica)

    def stored(self, request: Request) -> ResponseState:
        """As `of`; a 400 on a server that keeps nothing."""
        state = self.of(request)
        if state is None:
            raise InvalidRequestError("This server keeps no stored objects.")
        return state


def item_query(request: Request) -> ListQuery:
    """`after`, `limit`, `order` of an item list; the newest first unless `order=asc`."""
    query = list_query(request.query_params, filters=False)
    order = "desc" if request.query_params.get("order") is None else query.order
    return ListQuery(after=query.after, limit=query.limit, order=order)


def _starting_after(raw: str | None) -> int:
    if raw is None:
        return -1
    if not raw.strip().lstrip("-").isdigit():
        raise InvalidRequestError(
            f"Invalid 'starting_after': expected an integer, got '{raw}'.",
            param="starting_after",
        )
    return int(raw)


def router(core: ServerState, kept: Kept, runs: BackgroundRuns | None) -> APIRouter:
    """The routes, on the core's chat service, `kept`'s store and this replica's `runs`
    (None without a store)."""
    router = APIRouter()
    settings = core.settings

    def responses_service(request: Request) -> ResponsesService:
        return ResponsesService(core.chat, kept.of(request), core.secret)

    def background_runs() -> BackgroundRuns:
        if runs is None:  # they need a store, which the caller has checked
            raise InvalidRequestError("This server keeps no stored objects.")
        return runs

    @router.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        req = await parse_body(request, CreateResponse, settings.max_request_bytes)
        req = core.for_caller(req, caller(request.scope))
        service = responses_service(request)
        if req.background and (req.store is False or service.state is None):
            raise InvalidRequestError(
                "A 'background' response must be stored: 'store' cannot be false.",
                param="store",
            )
        if not req.background:
            return await answer(request, req, service, RESPONSES)
        job = await service.prepare(req)
        run = await background_runs().start(service, job)
        if req.stream:
            return frames_stream(run.follow(-1))
        return json_response(job.response)

    @router.post("/v1/responses/input_tokens")
    async def count_input_tokens(request: Request) -> Response:
        req = await parse_body(request, InputTokensRequest, settings.max_request_bytes)
        count = await responses_service(request).input_tokens(req)
        return json_response(InputTokens(input_tokens=count))

    @router.post("/v1/responses/compact")
    async def compact_response(request: Request) -> Response:
        req = await parse_body(request, CompactRequest, settings.max_request_bytes)
        shape = partial(core.for_caller, principal=caller(request.scope))
        compacted = await until_disconnect(request, responses_service(request).compact(req, shape))
        return json_response(compacted)

    @router.get("/v1/responses/{response_id}")
    async def retrieve_response(response_id: str, request: Request) -> Response:
        state = kept.stored(request)
        if request.query_params.get("stream", "false").lower() == "true":
            start = _starting_after(request.query_params.get("starting_after"))
            run = background_runs().get(response_id, state.owner)
            if run is None:
                raise InvalidRequestError(
                    "Only a background response this server is running, or has just run, "
                    "can be streamed.",
                    param="stream",
                )
            return frames_stream(run.follow(start))
        obj = await state.store.get_or_404(
            RESPONSE, response_id, state.owner, response_not_found(response_id)
        )
        return json_response(ResponseObject.model_validate(obj.body))

    @router.post("/v1/responses/{response_id}/cancel")
    async def cancel_response(response_id: str, request: Request) -> Response:
        state = kept.stored(request)
        run = background_runs().get(response_id, state.owner)
        if run is not None:
            return json_response(await background_runs().cancel(run))
        obj = await state.store.get_or_404(
            RESPONSE, response_id, state.owner, response_not_found(response_id)
        )
        if not obj.body.get("background"):
            raise InvalidRequestError("Only background responses can be cancelled.")
        return json_response(ResponseObject.model_validate(obj.body))

    @router.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str, request: Request) -> Response:
        state = kept.stored(request)
        await state.store.delete_or_404(
            RESPONSE, response_id, state.owner, response_not_found(response_id)
        )
        return json_response(ResponseDeleted(id=response_id, deleted=True))

    @router.get("/v1/responses/{response_id}/input_items")
    async def list_input_items(response_id: str, request: Request) -> Response:
        state = kept.stored(request)
        query = item_query(request)
        query = ListQuery(after=query.after, limit=query.limit, order=query.order, section="input")
        page = await state.store.items_or_404(
            RESPONSE, response_id, state.owner, query, response_not_found(response_id)
        )
        data = [wire_item(item) for item in page.data]
        return json_response(list_object(ResponseItemList, data, page.has_more))

    return router
