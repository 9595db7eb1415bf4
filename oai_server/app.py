"""Build the FastAPI app around an engine; the lifespan starts and stops the engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI

from oai_server import __version__
from oai_server.cache import build_cache
from oai_server.engine.protocol import Engine
from oai_server.error_responses import install_error_handlers
from oai_server.generation.chat_template import load_template
from oai_server.generation.work_limits import WorkLimits
from oai_server.metrics import Metrics
from oai_server.middleware import APIKeyMiddleware, MetricsMiddleware
from oai_server.realtime import router as realtime
from oai_server.routes import chat, completions, models, system, tokenize
from oai_server.services.chat import ChatService
from oai_server.services.completions import CompletionService
from oai_server.services.tokenize import TokenizeService
from oai_server.settings import Settings
from oai_server.state import ServerState
from oai_server.store import install as install_store
from oai_server.web import install as install_web_ui

logger = logging.getLogger(__name__)


async def _start_engine(engine: Engine, settings: Settings) -> None:
    try:
        await engine.start()
    except Exception:
        # The server stays up and /health says 503, so an orchestrator sees why.
        logger.exception("the engine failed to start")
        return
    logger.info(
        "serving model '%s' at http://%s:%d/v1", settings.model_name, settings.host, settings.port
    )


def create_app(settings: Settings, engine: Engine) -> FastAPI:
    """An app serving `engine` under `settings`; the engine starts when the app does.

    The HTTP server listens while the model loads: `/health` answers 503 until the
    engine is ready, which is what a Kubernetes readiness probe wants.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await store.start()
        starting = asyncio.create_task(_start_engine(engine, settings))
        try:
            yield
        finally:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            if cache is not None:
                await cache.close()
            await engine.stop()
            await store.stop()

    app = FastAPI(
        title="oai-server",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    metrics = Metrics(engine.running_requests)
    chat_template = load_template(settings.chat_template)
    limits = WorkLimits(settings.max_request_tokens, settings.max_request_prompts)
    chat_service = ChatService(
        engine, settings.model_name, chat_template, settings.tool_call_parser, limits
    )
    completion_service = CompletionService(engine, settings.model_name, limits)
    cache = build_cache(settings, metrics.registry, chat_service, completion_service)
    app.state.server = ServerState(
        settings=settings,
        engine=engine,
        chat=chat_service,
        completions=completion_service,
        tokenize=TokenizeService(engine, settings.model_name, chat_template),
        metrics=metrics,
        created=int(time.time()),
        cache=cache,
    )
    for module in (chat, completions, models, system, tokenize, realtime):
        app.include_router(module.router)
    store = install_store(app, settings, metrics.registry)
    install_error_handlers(app)
    install_web_ui(app, settings)  # last: the API routes win over the page's paths
    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
