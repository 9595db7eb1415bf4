"""The command line: flags generated from `Settings`, then uvicorn.

oai-server                       # the embedded SmolLM2-135M-Instruct on 127.0.0.1:8000
oai-server --model Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0 --tensor-parallel-size 2
oai-server --model qwen=Qwen/Qwen2.5-0.5B-Instruct --model smol=/models/smollm2
oai-server --models-file models.yaml
oai-server serve Qwen/Qwen2.5-7B-Instruct -tp 2 --quantization fp8   # a vllm serve line
oai-server key-id sk-...         # the id logs, metrics and the Usage API name that key by
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError
from pydantic_settings import SettingsError

from oai_server.app import create_app
from oai_server.assembly import build_embedding_engine, build_engine
from oai_server.cli import parse_command_line, print_key_ids
from oai_server.lifecycle import Lifecycle, Phase
from oai_server.models.embedded_embedding import EmbeddedEmbeddingModelError
from oai_server.models.entries import ModelEntry, ModelsFileError, model_entries
from oai_server.models.registry import DuplicateModelError
from oai_server.secret import SecretFileError
from oai_server.settings import EMBEDDED_MODEL_NAME, Settings
from oai_server.startup import (
    configure_logging,
    invalid_settings,
    prepare_gc_for_serving,
    quiet_uvicorn_start,
)
from oai_server.state import ServerState
from oai_server.vllm_notices import import_first_in_spawned_processes

logger = logging.getLogger("oai_server")


class Server(uvicorn.Server):
    """uvicorn, but SIGTERM drains (see `oai_server.lifecycle`) instead of closing at once.

    The first SIGTERM starts the drain and is not re-raised after shutdown, so the process
    exits with the lifecycle's status (0 after a drain); SIGINT, or a second SIGTERM,
    keeps uvicorn's own behaviour.
    """

    def __init__(self, config: uvicorn.Config, lifecycle: Lifecycle) -> None:
        super().__init__(config)
        self.lifecycle = lifecycle
        lifecycle.request_exit = self._request_exit

    def _request_exit(self) -> None:
        self.should_exit = True

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and self.lifecycle.phase is Phase.SERVING:
            self.lifecycle.drain_threadsafe()
            return
        super().handle_exit(sig, frame)


def serve(app: FastAPI, settings: Settings, **uvicorn_options: Any) -> int:
    """Serve `app` until it is stopped; the process's exit status."""
    state: ServerState = app.state.server
    lifecycle = state.lifecycle
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.uvicorn_log_level or settings.log_level,
        root_path=settings.root_path,
        ssl_keyfile=settings.ssl_keyfile,
        ssl_certfile=settings.ssl_certfile,
        ssl_ca_certs=None if settings.ssl_ca_certs is None else str(settings.ssl_ca_certs),
        ssl_cert_reqs=settings.ssl_cert_reqs,
        # uvicorn's loggers propagate to ours (configure_logging): one format on stderr.
        log_config=None,
        # Our own access log (oai_server.access) has the request id and token counts.
        access_log=False,
        # Requests in flight were drained already, or the engine is dead.
        timeout_graceful_shutdown=5,
        **uvicorn_options,
    )
    if settings.log_level != "debug":
        quiet_uvicorn_start()  # after uvicorn.Config, which configures uvicorn's logging
    prepare_gc_for_serving()
    try:
        Server(config, lifecycle).run()
    except KeyboardInterrupt:
        # Ctrl-C: uvicorn has shut the app down, then re-raises SIGINT; the stop is done,
        # and a traceback would only make a clean stop look like a crash.
        logger.debug("stopped by Ctrl-C")
    return lifecycle.exit_code


def _check_hub_models(entries: list[ModelEntry]) -> None:
    """Stop the start, in one line, at a hub model that can never load (models/hub.py)."""
    hub = [e.model for e in entries if e.model is not None]
    from oai_server.models.hub import HubModelError, check_hub_model, is_hub_id

    for model in hub:
        if is_hub_id(model):
            try:
                check_hub_model(model)
            except HubModelError as exc:
                sys.exit(f"oai-server: {exc}")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse flags and environment, then serve until stopped."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["key-id"]:
        try:
            print_key_ids(args[1:])
        except SecretFileError as exc:
            sys.exit(f"oai-server: {exc}")
        return
    try:
        command_line = parse_command_line(args)
    except ValidationError as exc:
        sys.exit(f"oai-server: {invalid_settings(exc)}")
    except (SettingsError, ValueError) as exc:  # a flag's value that could not be parsed
        sys.exit(f"oai-server: invalid settings: {exc}")
    settings = command_line.settings
    if settings.ssl_certfile is None and settings.ssl_keyfile is not None:
        sys.exit("oai-server: --ssl-keyfile needs --ssl-certfile (HTTPS needs both)")
    configure_logging(settings.log_level)
    for notice in command_line.notices:
        logger.warning("%s", notice)
    try:
        entries = model_entries(settings)  # read once, here, and handed down
        _check_hub_models(entries)
        embedder = build_embedding_engine(settings, entries)
        engine = build_engine(settings, entries)
        app = create_app(settings, engine, embedder=embedder, entries=entries)
    except (
        DuplicateModelError,
        EmbeddedEmbeddingModelError,
        ModelsFileError,
        SecretFileError,
    ) as exc:
        sys.exit(f"oai-server: {exc}")
    if any(e.kind == "chat" and e.model is None for e in entries):
        logger.info("no chat model named: serving the embedded %s", EMBEDDED_MODEL_NAME)
    code = serve(app, settings)
    logger.info("exiting with status %d", code)
    if code != 0:
        # The engine died: the app has shut down and its processes are reaped, and what is
        # left is the dead engine client's threads, whose clean-up at interpreter exit took
        # seconds (measured 4-6 s). Its supervisor should restart us now, not then.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    # `python -m oai_server`: the engine's spawned processes would not run this module.
    import_first_in_spawned_processes()
    main()
