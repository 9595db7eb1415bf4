"""Build the FastAPI app around an engine: the core services, then each feature, in one place.

The core is what every request uses: the admission step (the caller's token limit, the
batch's hand-back, the drain's refusal), the engine (admitted by it, measured, drainable),
the chat, completions and tokenize services, the metrics, the lifecycle. A feature (store,
cache, responses, realtime, auth, limits, the web page; see `oai_server.features`) is one
function of the typed state returning its routes, middleware, service and start/stop
hooks; the lifespan starts them after the engine's loading begins and stops them, in
reverse, before the engine stops. Every part, the routes included, is built with what it
uses as its constructor's or factory's arguments, in the order they need each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from oai_server import (
    __version__,
    anthropic,
    auth,
    batch,
    cache,
    embeddings,
    limits,
    lora,
    realtime,
    rerank,
    responses,
    store,
    tracing,
    usage,
    web,
)
from oai_server.admission import Admission
from oai_server.answering import AnsweringChain
from oai_server.batch import BatchRunner
from oai_server.batch.endpoints import Endpoint, ServiceEndpoint
from oai_server.cache import ResponseCache
from oai_server.dialects.model import ModelDialects
from oai_server.embeddings import EmbeddingService
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.engine.protocol import Engine
from oai_server.engine.router import EngineRouter, Stoppable, stop_all
from oai_server.engine.wrapper import EngineWrapper
from oai_server.error_responses import ERROR_SHAPES, ErrorShape, install_error_handlers
from oai_server.features import Feature, FeatureFactory
from oai_server.generation.chat_template import load_template
from oai_server.generation.for_caller import ForCaller
from oai_server.generation.service_tier import TierPolicy
from oai_server.generation.work_limits import WorkLimits
from oai_server.http.direct import DirectRoutes
from oai_server.http.open_paths import CORE_OPEN_PATHS, OpenPaths
from oai_server.http.sse import BODY_SEND
from oai_server.lifecycle import Lifecycle, LifecycleMiddleware
from oai_server.limits import RateLimiter
from oai_server.media.fetch import MediaFetcher
from oai_server.media.loader import ImageLoader
from oai_server.media.policy import MediaPolicy
from oai_server.models.adapters import AdapterEngine
from oai_server.models.entries import ModelEntry, first_chat, model_entries
from oai_server.models.served import served_models
from oai_server.observability.engine import InFlight, InstrumentedEngine
from oai_server.observability.metrics import Metrics
from oai_server.observability.middleware import ObservabilityMiddleware
from oai_server.resilience import Dependencies
from oai_server.responses.background import BackgroundRuns
from oai_server.routes import chat, completions, models, system, tokenize
from oai_server.routes import embeddings as embedding_routes
from oai_server.secret import ServerSecret
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings
from oai_server.startup import ready_message
from oai_server.state import ServerState
from oai_server.store import StoreService
from schemas.rerank import RerankRequest, ScoreRequest

logger = logging.getLogger(__name__)


async def _start_engine(
    engine: Engine, embedder: EmbeddingEngine | None, state: ServerState
) -> None:
    # One after the other: two vLLM engines loading at once in one process share
    # vLLM's process-wide configuration while they load.
    try:
        await engine.start()
        if embedder is not None:
            await embedder.start()
    except Exception:
        # The server stays up and /health says 503, so an orchestrator sees why.
        logger.exception("the engine failed to start")
        return
    settings, models = state.settings, state.models
    chat = [m.name for m in models if m.kind == "chat" and m.engine_model == m.name]
    embedding = next((m.name for m in models if m.kind == "embedding"), None)
    lines = ready_message(
        host=settings.host,
        port=settings.port,
        model=chat[0],
        dtype=engine.serving(chat[0]).model_info.dtype,
        web_ui=settings.web_ui,
        embedding_model=None if embedder is None else embedding,
        embedding_dtype=None if embedder is None else embedder.model_info.dtype,
        more_models=[(name, engine.serving(name).model_info.dtype) for name in chat[1:]],
        dialects=[(name, state.chat.describe(name)) for name in chat],
    )
    for line in lines:
        logger.info("%s", line)


# What a browser page may read of an answer: the request id, where its limits stand,
# and whether the response cache answered it.
EXPOSED_HEADERS = [
    "x-request-id",
    "retry-after",
    "x-cache",
    *(
        f"x-ratelimit-{what}-{kind}"
        for what in ("limit", "remaining", "reset")
        for kind in ("requests", "tokens")
    ),
]


def _router(engine: Engine) -> EngineRouter | None:
    """The router under `engine`'s wrappers (a Ray replica's `StartOnce`), if any."""
    while isinstance(engine, EngineWrapper):
        engine = engine.inner
    return engine if isinstance(engine, EngineRouter) else None


# Answered to anyone, no key asked and no limit counted: the core's probes, the page.
OPEN = OpenPaths(CORE_OPEN_PATHS | web.OPEN_PATHS, web.OPEN_PREFIXES)


def _core(
    settings: Settings,
    entries: Sequence[ModelEntry],
    engine: Engine,
    embedder: EmbeddingEngine | None,
    metrics: Metrics,
    dependencies: Dependencies,
    *,
    secret: ServerSecret,
    priority_keys: frozenset[str] | None,
    admission: Admission,
    in_flight: InFlight,
    replica: str | None,
) -> ServerState:
    """The shared services, before any feature; `admission` admits each request as it
    reaches an engine; `in_flight`: the chat engine's requests, which `metrics` reads;
    `priority_keys`: the ids of the keys that may ask for the `priority` tier (None:
    every key)."""
    # The names clients use: each engine of a router's, else the first chat model's.
    router = _router(engine)
    chat = [first_chat(entries).name] if router is None else list(router.engines)
    registry = served_models(entries, chat=chat, embedding=embedder is not None)
    model_name = chat[0]  # what a request without a model of its own gets
    adapters = None
    if settings.lora_enabled:
        adapters = AdapterEngine(
            engine, registry, model_name, settings.lora_dir, settings.max_lora_rank
        )
    served = InstrumentedEngine(
        adapters or engine,
        metrics,
        in_flight,
        admission.admit,
        keep_prompt_text=settings.log_request_text,
        model_name=model_name,
    )
    chat_template = load_template(settings.chat_template)
    work = WorkLimits(
        settings.max_request_tokens, settings.max_request_prompts, settings.strict_max_tokens
    )
    tiers = TierPolicy(settings.scheduling_policy == "priority", priority_keys)
    dialects = _dialects(settings, entries, served)
    return ServerState(
        settings=settings,
        engine=served,
        admission=admission,
        chat=ChatService(
            served,
            model_name,
            chat_template,
            dialects,
            work,
            registry,
            images=ImageLoader(MediaFetcher(media_policy(settings))),
        ),
        completions=CompletionService(served, model_name, work, registry),
        tokenize=TokenizeService(served, model_name, chat_template, registry, dialects),
        metrics=metrics,
        lifecycle=Lifecycle(served, admission, settings.drain_timeout),
        created=int(time.time()),
        dependencies=dependencies,
        secret=secret,
        models=registry,
        adapters=adapters,
        embedder=embedder,
        for_caller=ForCaller(tiers, settings.prefix_cache_shared),
        replica=replica,
    )


def media_policy(settings: Settings) -> MediaPolicy:
    """Where images may be fetched from: vLLM's flags (the command line's engine
    arguments), with our limits."""
    return MediaPolicy.of(
        settings.vllm_args,
        timeout_s=settings.media_fetch_timeout,
        max_bytes=settings.media_max_bytes,
        max_redirects=settings.media_max_redirects,
        max_request_pixels=settings.media_max_request_pixels,
        max_server_pixels=settings.media_max_server_pixels,
        max_request_fetches=settings.media_max_request_fetches,
        max_server_fetches=settings.media_max_server_fetches,
    )


def _dialects(settings: Settings, entries: Sequence[ModelEntry], engine: Engine) -> ModelDialects:
    """Each chat model's dialect, read with the server's --tool-call-parser and
    --reasoning-parser, and each models-file entry's own tool-call parser."""
    own = {e.name: e.tool_call_parser for e in entries if e.tool_call_parser is not None}
    return ModelDialects(engine, settings.tool_call_parser, settings.reasoning_parser, own)


@dataclass(frozen=True)
class Wired:
    """The app as assembled: its core, each feature's service, and the answering chain.

    Kept on `app.state.wired` for what looks at a feature from outside (tests, tools);
    the app's own parts get what they use as arguments, never from here.
    """

    core: ServerState
    store: StoreService
    cache: ResponseCache | None
    background: BackgroundRuns | None
    limiter: RateLimiter | None
    embeddings: EmbeddingService | None
    batch: BatchRunner | None
    answering: AnsweringChain
    # Every feature, in order: middleware, routes, start (and stop, reversed).
    features: Sequence[Feature[object]]


def _wire(
    settings: Settings,
    entries: Sequence[ModelEntry],
    engine: Engine,
    embedder: EmbeddingEngine | None,
    extra: Sequence[FeatureFactory],
    replica: str | None,
) -> Wired:
    """The core and every feature, each given what it uses, in one place."""
    # First: the metrics' gauge counts the requests the chat engine will hold.
    in_flight = InFlight()
    metrics = Metrics(engine.running_requests, in_flight.waiting_requests)
    dependencies = Dependencies(metrics.registry)
    # Before the core, whose admission step reserves tokens against the limiter and has
    # the batch's lines on the chat engine (the runner adds them there) make room.
    limited = limits.feature(settings, metrics, dependencies, OPEN)
    limiter = limited.service
    lines = batch.BatchLines(settings.batch_max_in_flight)
    admission = Admission(
        None if limiter is None or limiter.tpm is None else limiter.reserve_tokens,
        lines.make_room,
    )
    secret = ServerSecret.load(settings.secret_key, settings.data_dir)
    keys = auth.configured_keys(settings, secret)
    given = settings.service_tier_priority_keys
    # A key's id from before the server secret still names that key.
    priority = None if given is None else keys.current_ids(given, "--service-tier-priority-keys")
    core = _core(
        settings,
        entries,
        engine,
        embedder,
        metrics,
        dependencies,
        secret=secret,
        priority_keys=priority,
        admission=admission,
        in_flight=in_flight,
        replica=replica,
    )
    traced = tracing.feature(settings)
    # What keys own under their ids from before the server secret is theirs still.
    stored = store.feature(core, keys.renames())
    embedded = embeddings.feature(core)
    cached = cache.feature(core, embedded.service)
    # A socket is one request at its handshake; each of its later turns is one more.
    per_turn = None if limiter is None or limiter.rpm is None else limiter.take_request
    answered = responses.feature(core, stored.service, per_turn)
    scored = rerank.feature(core, cached.service)
    more: dict[str, Endpoint] = {}
    if scored.service is not None:
        # On the embedding model's engine, as embeddings' lines are.
        for url, schema in (("/v1/rerank", RerankRequest), ("/v1/score", ScoreRequest)):
            more[url] = ServiceEndpoint(schema, scored.service, shares_chat_engine=False)
    batched = batch.feature(core, lines, stored.service, embedded.service, traced.service, more)
    used = usage.feature(core, stored.service)
    chain = AnsweringChain(
        core.chat, core.completions, embedded.service, stored.service, cached.service
    )
    features: list[Feature[object]] = [
        traced,  # first: its span holds every other feature's work on the request
        stored,
        cached,
        answered,
        anthropic.feature(core, chain, stored.service, batched.service),
        batched,
        used,
        realtime.feature(core, None if limiter is None else limiter.settle),
        lora.feature(core),
        # Middleware in this order, inside the core's: keys, then limits (per key).
        auth.feature(keys, OPEN),
        limited,
        embedded,
        scored,
        *(make(core) for make in extra),
        web.feature(settings),  # last: the API's routes win over the page's paths
    ]
    return Wired(
        core,
        stored.service,
        cached.service,
        answered.service,
        limiter,
        embedded.service,
        batched.service,
        chain,
        features,
    )


def _core_routes(core: ServerState, answering: AnsweringChain) -> list[Route]:
    """Chat and completions, the busiest routes (answered past Starlette's router)."""
    settings = core.settings
    shaped = (core.for_caller, settings.max_request_bytes, settings.enable_force_include_usage)
    return [chat.route(answering, *shaped), completions.route(answering, *shaped)]


class ServerApp(FastAPI):
    """FastAPI, keeping the ASGI server's own `send` for streamed bodies (`BODY_SEND`).

    Every `send` wrapper between here and a route (Starlette's error middleware, ours)
    looks at the response's start only; a stream's chunks skip them all.
    """

    # The features' own error envelopes, by path, for the one error function.
    error_shapes: Sequence[ErrorShape] = ()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[BODY_SEND] = send
        scope[ERROR_SHAPES] = self.error_shapes
        try:
            await super().__call__(scope, receive, send)
        finally:
            # The server's `send` is bound to its request's object, which holds `scope`:
            # a reference cycle per request, left to the garbage collector, unless cut.
            scope.pop(BODY_SEND, None)


def create_app(
    settings: Settings,
    engine: Engine,
    *,
    embedder: EmbeddingEngine | None = None,
    entries: Sequence[ModelEntry] | None = None,
    extra: Sequence[FeatureFactory] = (),
    replica: str | None = None,
) -> FastAPI:
    """An app serving `engine` (and `embedder`, for /v1/embeddings) under `settings`; the
    engines start when the app does. `entries`: the models served, as read once at start-up
    (`model_entries(settings)` when not given).

    The HTTP server listens while the model loads: `/health` answers 503 until the
    engines are ready, which is what a Kubernetes readiness probe wants. `extra`: features
    from outside the package (a Ray replica's metrics mirror), after the built-in ones.
    `replica`: the Ray Serve replica's id, recorded with stored responses.
    """
    if entries is None:
        entries = model_entries(settings)
    wired = _wire(settings, entries, engine, embedder, extra, replica)
    state, features = wired.core, wired.features

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        started: list[Feature[object]] = []
        starting = asyncio.create_task(_start_engine(state.engine, embedder, state))
        router = _router(engine)
        several = router is not None and len(router.engines) > 1
        # One model of several dies: the others' requests in flight may finish.
        check = state.engine.check_health if several else None
        tasks = [starting, asyncio.create_task(state.lifecycle.watch_engine(check, "engine"))]
        if embedder is not None:
            watching = state.lifecycle.watch_engine(embedder.check_health, "embedding engine")
            tasks.append(asyncio.create_task(watching))
        try:
            for feature in features:
                if feature.start is not None:
                    await feature.start()
                started.append(feature)
            yield
        finally:
            # Reverse order: background responses end (and are stored) before the store stops.
            for feature in reversed(started):
                if feature.stop is not None:
                    await feature.stop()
            await state.dependencies.close()  # their probes, once nothing uses them
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            engines: dict[str, Stoppable] = {"chat": state.engine}
            if embedder is not None:
                engines["embedding"] = embedder
            await stop_all(engines)

    app = ServerApp(
        title="oai-server",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # A trailing slash is dropped before routing (ObservabilityMiddleware), never
        # redirected: a 307 loses a POST with many clients.
        redirect_slashes=False,
    )
    # For the command line (which sets how the lifecycle exits) and tests; routes get what
    # they use as their factories' arguments, never from here.
    app.state.server = state
    app.state.wired = wired
    app.error_shapes = [shape for feature in features for shape in feature.error_shapes]
    core_routes = _core_routes(state, wired.answering)
    app.router.routes.extend(core_routes)
    app.include_router(models.router(state, [f.model_list for f in features if f.model_list]))
    engines = [state.engine.check_health]
    if embedder is not None:
        engines.append(embedder.check_health)
    reports = [f.health for f in features if f.health is not None]
    app.include_router(system.router(engines, state.dependencies, state.metrics, reports))
    app.include_router(tokenize.router(state.tokenize, settings.max_request_bytes))
    app.include_router(
        embedding_routes.router(wired.answering, state.models, settings.max_request_bytes)
    )
    for feature in features:
        app.router.routes.extend(feature.routes)
    install_error_handlers(app)
    # The last added runs first: CORS, then id/log/metrics, drain, then the features' own,
    # then the busiest routes, answered past Starlette's router.
    app.add_middleware(DirectRoutes, routes=core_routes)
    for feature in reversed(features):
        for middleware in reversed(feature.middleware):
            app.add_middleware(middleware.cls, *middleware.args, **middleware.kwargs)
    app.add_middleware(LifecycleMiddleware, lifecycle=state.lifecycle)
    app.add_middleware(
        ObservabilityMiddleware,
        metrics=state.metrics,
        log_text=settings.log_request_text,
        max_log_len=settings.max_log_len,
    )
    if settings.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_allow_origins,
            allow_methods=settings.cors_allow_methods,
            allow_headers=settings.cors_allow_headers,
            allow_credentials=settings.cors_allow_credentials,
            expose_headers=EXPOSED_HEADERS,
        )
    return app
