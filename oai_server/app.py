"""Build the FastAPI app around an engine; the lifespan starts and stops the engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from oai_server import __version__, responses
from oai_server.auth import AuthMiddleware, load_keys
from oai_server.cache import build_cache
from oai_server.embeddings import install as install_embeddings
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.engine.protocol import Engine
from oai_server.error_responses import install_error_handlers
from oai_server.generation.chat_template import load_template
from oai_server.generation.work_limits import WorkLimits
from oai_server.lifecycle import Lifecycle, LifecycleMiddleware
from oai_server.limits import Backend, MemoryBackend, RateLimiter, RateLimitMiddleware, RedisBackend
from oai_server.models import ModelRegistry, ServedModel
from oai_server.models.adapters import AdapterEngine
from oai_server.observability.engine import InstrumentedEngine
from oai_server.observability.metrics import Metrics
from oai_server.observability.middleware import ObservabilityMiddleware
from oai_server.realtime import router as realtime
from oai_server.routes import chat, completions, lora, models, system, tokenize
from oai_server.routes.models import model_root
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings
from oai_server.startup import ready_message
from oai_server.state import ServerState
from oai_server.store import install as install_store
from oai_server.web import install as install_web_ui

logger = logging.getLogger(__name__)


async def _start_engine(
    engine: Engine, embedder: EmbeddingEngine | None, settings: Settings
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
    lines = ready_message(
        host=settings.host,
        port=settings.port,
        model=settings.model_name,
        dtype=engine.model_info.dtype,
        embedding_model=None if embedder is None else settings.embedding_model_name,
        embedding_dtype=None if embedder is None else embedder.model_info.dtype,
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


def _limiter(settings: Settings, metrics: Metrics) -> RateLimiter | None:
    if settings.rate_limit_rpm is None and settings.rate_limit_tpm is None:
        return None
    backend: Backend = (
        MemoryBackend() if settings.redis_url is None else RedisBackend(settings.redis_url)
    )
    return RateLimiter(
        backend,
        rpm=settings.rate_limit_rpm,
        tpm=settings.rate_limit_tpm,
        window_s=settings.rate_limit_window,
        metrics=metrics,
    )


def _registry(settings: Settings, embedder: EmbeddingEngine | None) -> ModelRegistry:
    """The chat model, its LoRA adapters, and the embedding model when there is one: the
    names clients use."""
    base = settings.model_name
    models = ModelRegistry([ServedModel(base, "chat", model_root(settings))])
    for name in settings.lora_paths():
        # `root` is the adapter's name, as `vllm serve` lists it, never where it lies.
        models.add(ServedModel(name, "chat", name, parent=base))
    embedding_name = settings.embedding_model_name
    if embedder is not None and embedding_name is not None:
        models.add(ServedModel(embedding_name, "embedding", embedding_name))
    return models


def create_app(
    settings: Settings, engine: Engine, embedder: EmbeddingEngine | None = None
) -> FastAPI:
    """An app serving `engine` (and `embedder`, for /v1/embeddings) under `settings`; the
    engines start when the app does.

    The HTTP server listens while the model loads: `/health` answers 503 until the
    engine is ready, which is what a Kubernetes readiness probe wants.
    """
    metrics = Metrics(engine.running_requests, lambda: served.waiting_requests())
    limiter = _limiter(settings, metrics)
    admit = limiter.reserve_tokens if limiter is not None and limiter.tpm is not None else None
    registry = _registry(settings, embedder)
    adapters = None
    if settings.lora_enabled:
        adapters = AdapterEngine(
            engine, registry, settings.model_name, settings.lora_dir, settings.max_lora_rank
        )
    # What every service submits through: measured, token-limited, drainable.
    served = InstrumentedEngine(
        adapters or engine, metrics, admit, keep_prompt_text=settings.log_request_text
    )
    lifecycle = Lifecycle(served, settings.drain_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await store.start()
        starting = asyncio.create_task(_start_engine(served, embedder, settings))
        tasks = [starting, asyncio.create_task(lifecycle.watch_engine())]
        if embedder is not None:
            watching = lifecycle.watch_engine(embedder.check_health, "embedding engine")
            tasks.append(asyncio.create_task(watching))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if embedder is not None:
                await embedder.stop()
            await served.stop()
            if cache is not None:
                await cache.close()
            await store.stop()
            if limiter is not None:
                await limiter.backend.close()

    app = FastAPI(
        title="oai-server",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # A trailing slash is dropped before routing (ObservabilityMiddleware), never
        # redirected: a 307 loses a POST with many clients.
        redirect_slashes=False,
    )
    chat_template = load_template(settings.chat_template)
    limits = WorkLimits(settings.max_request_tokens, settings.max_request_prompts)
    chat_service = ChatService(
        served, settings.model_name, chat_template, settings.tool_call_parser, limits, registry
    )
    completion_service = CompletionService(served, settings.model_name, limits, registry)
    cache = build_cache(settings, metrics.registry, chat_service, completion_service)
    app.state.server = ServerState(
        settings=settings,
        engine=served,
        chat=chat_service,
        completions=completion_service,
        tokenize=TokenizeService(served, settings.model_name, chat_template),
        metrics=metrics,
        created=int(time.time()),
        cache=cache,
        models=registry,
        adapters=adapters,
    )
    app.state.lifecycle = lifecycle
    for module in (chat, completions, models, system, tokenize, realtime, responses):
        app.include_router(module.router)
    if adapters is not None and settings.allow_runtime_lora:
        app.include_router(lora.router)
    store = install_store(app, settings, metrics.registry)
    embedding_name = settings.embedding_model_name or ""
    install_embeddings(app, embedder, embedding_name, limits, admit, metrics)
    install_error_handlers(app)
    install_web_ui(app, settings)  # last: the API routes win over the page's paths
    # The last added runs first: CORS, then id/log/metrics, drain, keys, limits.
    if limiter is not None:
        app.add_middleware(RateLimitMiddleware, limiter=limiter)
    keys = load_keys(settings.api_key, settings.api_keys_file)
    if keys:
        app.add_middleware(AuthMiddleware, keys=keys)
    app.add_middleware(LifecycleMiddleware, lifecycle=lifecycle)
    app.add_middleware(ObservabilityMiddleware, metrics=metrics, log_text=settings.log_request_text)
    if settings.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_allow_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=EXPOSED_HEADERS,
        )
    return app
