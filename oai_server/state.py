"""The app's one typed state: the shared services, and what each feature offers the others.

Built once per app by `create_app`, reached by routes through `server_state(request)`
(HTTP or WebSocket); nothing else is put on `app.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

from oai_server.engine.pooling import EmbeddingEngine
from oai_server.generation.service_tier import TierPolicy
from oai_server.lifecycle import Lifecycle
from oai_server.models import ModelRegistry
from oai_server.models.adapters import AdapterEngine
from oai_server.observability.engine import InstrumentedEngine
from oai_server.observability.metrics import Metrics
from oai_server.resilience import Dependencies
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings

if TYPE_CHECKING:
    # The features' services: named here for their types only, so a feature package
    # may import this module without a cycle.
    from oai_server.cache import ResponseCache
    from oai_server.embeddings import EmbeddingService
    from oai_server.limits import RateLimiter
    from oai_server.responses.background import BackgroundRuns
    from oai_server.store.service import StoreService


@dataclass
class ServerState:
    settings: Settings
    # What every service submits through: measured, token-limited, drainable.
    engine: InstrumentedEngine
    chat: ChatService
    completions: CompletionService
    tokenize: TokenizeService
    metrics: Metrics
    lifecycle: Lifecycle
    created: int
    # Redis and the database, each behind one breaker: /health and oai_dependency_up.
    dependencies: Dependencies
    # Every model served, by the name clients use.
    models: ModelRegistry = field(default_factory=ModelRegistry)
    # Adapters of the chat model loaded after start-up, when the server serves LoRA.
    adapters: AdapterEngine | None = None
    # The embedding model's engine, when one is served (`--embedding-model`).
    embedder: EmbeddingEngine | None = None
    # How `service_tier` is served: engine priorities, and the keys that may jump ahead.
    tiers: TierPolicy = field(default_factory=lambda: TierPolicy(by_priority=False))
    # Set by `create_app` from each feature's `service`, in feature order.
    store: StoreService | None = None
    # The response cache, when `--response-cache` turns it on.
    cache: ResponseCache | None = None
    # This replica's background responses (None without a store to keep them on).
    background: BackgroundRuns | None = None
    # Per-key limits, when `--rate-limit-rpm` or `--rate-limit-tpm` sets one.
    limiter: RateLimiter | None = None
    # `/v1/embeddings`, on `embedder`.
    embeddings: EmbeddingService | None = None
    # The Ray Serve replica this app runs in (None outside Ray), recorded with stored
    # responses so the affinity gateway can send a conversation back to its prefix cache.
    replica: str | None = None


def server_state(connection: HTTPConnection) -> ServerState:
    """The state of the app serving `connection` (a `Request` or a `WebSocket`)."""
    state: ServerState = connection.app.state.server
    return state
