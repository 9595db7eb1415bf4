"""What the routes reach through `request.app.state`: built once per app."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from oai_server.cache import ResponseCache
from oai_server.engine.protocol import Engine
from oai_server.observability.metrics import Metrics
from oai_server.resilience import Dependencies
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings


@dataclass
class ServerState:
    settings: Settings
    engine: Engine
    chat: ChatService
    completions: CompletionService
    tokenize: TokenizeService
    metrics: Metrics
    created: int
    # The response cache, when `--response-cache` turns it on.
    cache: ResponseCache | None = None
    # Redis and the database as their breakers see them, for /health.
    dependencies: Dependencies | None = None


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state
