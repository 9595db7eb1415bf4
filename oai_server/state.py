"""What the routes reach through `request.app.state`: built once per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from oai_server.cache import ResponseCache
from oai_server.engine.protocol import Engine
from oai_server.models import ModelRegistry
from oai_server.models.adapters import AdapterEngine
from oai_server.observability.metrics import Metrics
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
    # Every model served, by the name clients use.
    models: ModelRegistry = field(default_factory=ModelRegistry)
    # Adapters loaded after start-up, when the server serves LoRA.
    adapters: AdapterEngine | None = None
    # The response cache, when `--response-cache` turns it on.
    cache: ResponseCache | None = None


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state
