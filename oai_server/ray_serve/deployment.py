"""The Serve deployment: each replica builds the whole app around an engine of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from ray import serve
from ray.serve import Application, Deployment
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oai_server.app import create_app
from oai_server.engine.vllm.args import THREADS_BIND_VARIABLE
from oai_server.models.entries import model_entries
from oai_server.ray_serve import cores, ray_metrics
from oai_server.ray_serve.affinity import RouteHint
from oai_server.ray_serve.engine import (
    StartOnce,
    StartOnceEmbedding,
    load_embedding_factory,
    load_factory,
)
from oai_server.ray_serve.gateway import Gateway
from oai_server.ray_serve.options import deployment_options, gateway_options
from oai_server.ray_serve.sockets import Sessions
from oai_server.settings import Settings

DEPLOYMENT_NAME = "OAIServer"
GATEWAY_NAME = "Gateway"
REPLICA_HEADER = "x-replica"
# The builder's arguments that are not settings: the engine factories (tests: the fakes).
ENGINE_FACTORY_ARG = "engine_factory"
EMBEDDING_FACTORY_ARG = "embedding_engine_factory"


class ReplicaHeader:
    """Name the replica that answered in an `x-replica` header (operators and tests use it)."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_named)


class Replica:
    """One replica: settings, engines, services and routes, exactly as `oai-server` builds
    them: every chat model of its settings and the embedding model beside them.

    The constructor loads the models before Serve routes anything here; Serve's health
    check asks every engine; on shutdown Serve lets in-flight requests finish (up to
    `ray_graceful_shutdown_timeout_s`) before the app's lifespan stops the engines.
    """

    # Serve awaits an async constructor (mypy only knows sync ones).
    async def __init__(  # type: ignore[misc]
        self,
        settings: dict[str, Any],
        engine_factory: str | None,
        embedding_factory: str | None = None,
    ) -> None:
        context = serve.get_replica_context()
        self.replica = context.replica_id.unique_id
        self.settings = Settings(**settings)  # the rest from this node's OAI_* and defaults
        if self.settings.ray_cpu_cores == "per-replica":
            # Serve's node-local rank (Ray 2.60 has it; read only when asked for).
            rank = context.rank.local_rank
            self.settings = cores.own_cores(self.settings, rank, os.sched_getaffinity(0))
            # A models file's entries that name no cores of their own take the variable.
            # vLLM's engine logs the cores it binds ("core ids=[...]").
            os.environ[THREADS_BIND_VARIABLE] = self.settings.cpu_threads_bind or ""
        # The models, read once per replica, and handed to the engines and the app.
        self.entries = model_entries(self.settings)
        self.engine = StartOnce(load_factory(engine_factory)(self.settings, self.entries))
        embedder = load_embedding_factory(embedding_factory)(self.settings, self.entries)
        self.embedder = None if embedder is None else StartOnceEmbedding(embedder)
        # One after the other, as the plain server loads them (vLLM's configuration is
        # process-wide while an engine loads).
        await self.engine.start()
        if self.embedder is not None:
            try:
                await self.embedder.start()
            except BaseException:
                # Serve retries a failed replica: its chat engine's processes must go now.
                await self.engine.stop()
                raise
        # Ray's metrics mirror is one more feature: the app's lifespan starts and stops it.
        self._app = create_app(
            self.settings,
            self.engine,
            embedder=self.embedder,
            entries=self.entries,
            extra=[ray_metrics.feature],
            replica=self.replica,
        )
        self.sockets = Sessions(self.replica)

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return ReplicaHeader(self._app, self.replica)

    async def handle_http(
        self, scope: Scope, body: bytes, hint: RouteHint | None
    ) -> AsyncIterator[list[Message]]:
        """One HTTP request from the gateway (`hint` is for the router): its ASGI messages,
        in batches of those sent while the previous batch was on its way.

        Each item of a Ray stream costs both processes a serialization and a message: one
        per token would put the gateway's hop on every streamed chunk. A batch is only what
        has already been sent, so no message waits for another (Serve's own path from a
        replica to its proxy batches the same way).

        The body is whole; the request then waits for a disconnect that only comes as
        cancellation (the gateway cancels this call when its client leaves).
        """
        received = False
        sent: asyncio.Queue[Message | None] = asyncio.Queue()

        async def receive() -> Message:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Future()  # never set: only cancellation ends the wait
            raise AssertionError("unreachable")

        async def run() -> None:
            try:
                await ReplicaHeader(self._app, self.replica)(scope, receive, sent.put)
            finally:
                sent.put_nowait(None)

        task = asyncio.create_task(run())
        try:
            message = await sent.get()
            while message is not None:
                batch = [message]
                while not sent.empty() and (message := sent.get_nowait()) is not None:
                    batch.append(message)
                yield batch
                if message is not None:
                    message = await sent.get()
            await task  # its error, if any, reaches the gateway
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def open_socket(
        self, session: str, scope: Scope, first: Message, hint: RouteHint | None
    ) -> AsyncIterator[list[Message]]:
        """A WebSocket the gateway relays (`hint` is for the router): see `sockets.py`.
        (An async generator itself: Serve streams only what such a method returns.)"""
        async for batch in self.sockets.open(self._app, session, scope, first):
            yield batch

    async def deliver_socket(self, session: str, message: Message, hint: RouteHint) -> bool:
        """A relayed socket's next client message (`hint` pins it to this replica)."""
        return self.sockets.deliver(session, message)

    async def check_health(self) -> None:
        """Serve's health probe: raises (and Serve replaces the replica) once an engine dies."""
        await self.engine.check_health()
        if self.embedder is not None:
            await self.embedder.check_health()


class GatewayedReplica(Replica):
    """A replica behind the gateway, reached by its handle only: Serve allows one ingress
    per application, and the gateway is the one (it takes WebSockets too). Without Serve's
    ASGI wrapper to run it, the replica runs its app's lifespan itself."""

    async def __init__(  # type: ignore[misc]
        self,
        settings: dict[str, Any],
        engine_factory: str | None,
        embedding_factory: str | None = None,
    ) -> None:
        await super().__init__(settings, engine_factory, embedding_factory)
        self._lifespan = contextlib.AsyncExitStack()
        await self._lifespan.enter_async_context(self._app.router.lifespan_context(self._app))

    async def __del__(self) -> None:
        """Serve's shutdown of the replica: the app's lifespan ends (engines stopped)."""
        await self._lifespan.aclose()


# The app is built per replica (`__serve_build_asgi_app__`), not pickled from the driver.
OAIServer: Deployment = serve.deployment(name=DEPLOYMENT_NAME)(serve.ingress()(Replica))
BehindGateway: Deployment = serve.deployment(name=DEPLOYMENT_NAME)(GatewayedReplica)
# The gateway is an ASGI app of its own, so Serve's proxy hands it WebSockets too.
GatewayDeployment: Deployment = serve.deployment(name=GATEWAY_NAME)(serve.ingress()(Gateway))


def build_app(args: dict[str, Any]) -> Application:
    """Serve's application builder: `args` are the server's settings by field name.

    `serve run oai_server.ray_serve:build_app model=Qwen/Qwen2.5-7B-Instruct ray_max_replicas=4`,
    or the `args:` of an application in a Serve config file. Settings not given come from
    the `OAI_*` environment and the defaults, as for `oai-server`.
    """
    args = dict(args)
    engine_factory = args.pop(ENGINE_FACTORY_ARG, None)
    embedding_factory = args.pop(EMBEDDING_FACTORY_ARG, None)
    unknown = sorted(set(args) - set(Settings.model_fields))
    if unknown:
        raise ValueError(f"unknown settings for oai-server: {', '.join(unknown)}")
    settings = Settings(**args)
    gateway = settings.ray_router == "affinity"
    deployment = (BehindGateway if gateway else OAIServer).options(**deployment_options(settings))
    # Only what was given (args, the OAI_* environment where the builder runs): defaults
    # such as the cache directory are resolved on each replica's own node.
    given = settings.model_dump(exclude_unset=True)
    app: Application = deployment.bind(given, engine_factory, embedding_factory)
    if gateway:
        app = GatewayDeployment.options(**gateway_options(settings)).bind(
            app, REPLICA_HEADER, given
        )
    return app
