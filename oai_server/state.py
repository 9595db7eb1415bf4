"""The core's typed state: what every request may use, whichever features are on.

Built once per app by `create_app` and never changed after (frozen), and handed down: a
feature gets what it uses as its `feature(...)` function's arguments (see
`oai_server.features`), a route as its factory's (`routes.tokenize.router(service, ...)`);
no handler looks it up on the request's app. It names no feature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oai_server.admission import Admission
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.generation.for_caller import ForCaller
from oai_server.generation.service_tier import TierPolicy
from oai_server.lifecycle import Lifecycle
from oai_server.models import ModelRegistry
from oai_server.models.adapters import AdapterEngine
from oai_server.observability.engine import InstrumentedEngine
from oai_server.observability.metrics import Metrics
from oai_server.resilience import Dependencies
from oai_server.secret import ServerSecret
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings


@dataclass(frozen=True)
class ServerState:
    settings: Settings
    # What every service submits through: admitted by `admission`, measured, drainable.
    engine: InstrumentedEngine
    # What every request passes before it reaches an engine: the chat engine's (through
    # `engine`) and the pooling services' (`admit_pooling`).
    admission: Admission
    chat: ChatService
    completions: CompletionService
    tokenize: TokenizeService
    metrics: Metrics
    lifecycle: Lifecycle
    created: int
    # Redis and the database, each behind one breaker: /health and oai_dependency_up.
    dependencies: Dependencies
    # The deployment's secret: API-key ids and sealed reasoning are keyed with it.
    secret: ServerSecret
    # Every model served, by the name clients use.
    models: ModelRegistry = field(default_factory=ModelRegistry)
    # Adapters of the chat model loaded after start-up, when the server serves LoRA.
    adapters: AdapterEngine | None = None
    # The embedding model's engine, when one is served (`--embedding-model`).
    embedder: EmbeddingEngine | None = None
    # A request shaped for its caller: its prefix-cache salt and its `service_tier`.
    for_caller: ForCaller = field(default_factory=lambda: ForCaller(TierPolicy(False)))
    # The Ray Serve replica this app runs in (None outside Ray), recorded with stored
    # responses so the affinity gateway can send a conversation back to its prefix cache.
    replica: str | None = None
