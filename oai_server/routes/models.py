"""`GET /v1/models` and `GET /v1/models/{model}`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from oai_server.errors import ModelNotFoundError
from oai_server.http.answer import json_response
from oai_server.state import ServerState, server_state
from schemas.common import ListModelsResponse, Model

router = APIRouter()


def _model(server: ServerState) -> Model:
    info = server.engine.model_info
    return Model(
        id=server.settings.model_name,
        created=server.created,
        owned_by="oai-server",
        root=info.source,
        max_model_len=info.max_model_len,
    )


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    return json_response(ListModelsResponse(data=[_model(server_state(request))]))


@router.get("/v1/models/{model:path}")
async def retrieve_model(model: str, request: Request) -> Response:
    server = server_state(request)
    if model != server.settings.model_name:
        raise ModelNotFoundError(f"The model '{model}' does not exist.", param="model")
    return json_response(_model(server))
