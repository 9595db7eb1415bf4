"""How a feature is wired into the app: one function, one `Feature`.

Each feature package (`store`, `cache`, `responses`, `batch`, `embeddings`, `realtime`,
`lora`, `auth`, `limits`, `web`, and Ray's metrics mirror) exposes `feature(...) ->
Feature`, whose arguments are what it uses: the core (`ServerState`: settings, engine,
chat, completions, metrics, ...) and the services of the features it builds on
(`responses.feature(core, store)`), so its dependencies are read from its signature. It
returns its routes, its middleware, the service it offers the features after it, what
must run while the app runs, and the wire shapes of its own that the core's answers take
for its clients (its error envelope by path, its model list by header), so the core never
names the feature. `create_app` calls them in one place, in order, and
hands each service on by name; its lifespan starts them in that order and stops them in
the reverse one, so a SIGTERM drains and closes everything a feature holds (writers,
tasks, connections).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from oai_server.error_responses import ErrorShape
from oai_server.routes.models import ModelListShape
from oai_server.routes.system import HealthReport
from oai_server.state import ServerState

S = TypeVar("S", covariant=True)
Hook = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Feature(Generic[S]):
    """What one feature adds to the app."""

    # What the feature offers the rest of the app (None: nothing).
    service: S
    # Added after the core API's routes, in feature order.
    routes: Sequence[BaseRoute] = ()
    # Outermost first; all inside the core's (CORS, request id and log, drain).
    middleware: Sequence[Middleware] = ()
    # Awaited at start-up, before the app takes requests (the engine loads meanwhile).
    start: Hook | None = None
    # Awaited at shutdown, after the requests in flight were drained.
    stop: Hook | None = None
    # Its part of `/health`'s body, in feature order, before `dependencies`.
    health: HealthReport | None = None
    # Its own error envelope on the paths under a prefix, which its clients read.
    error_shapes: Sequence[ErrorShape] = ()
    # Its own shape of `/v1/models`, for the requests that carry its header.
    model_list: ModelListShape | None = None


# A feature not in `oai_server` itself (Ray's metrics mirror): `create_app(..., extra=[...])`.
FeatureFactory = Callable[[ServerState], Feature[object]]
