"""The registry of one server, from its model entries: the names clients use, and what
`/v1/models` says each one is.

Like vLLM's `OpenAIServingModels`, this package alone decides the served names: the
chat models, their LoRA adapters, and the embedding model are all named from the entries
read once at start-up (`entries.model_entries`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from oai_server.models.entries import ModelEntry
from oai_server.models.registry import ModelRegistry, ServedModel
from oai_server.settings import EMBEDDED_EMBEDDING_MODEL_NAME, EMBEDDED_MODEL_NAME


def model_root(entry: ModelEntry) -> str:
    """What the model is, for `root`: its hub id or its name, never where it lies on disk.

    The weights' directory (the embedded model's is under the server user's home) tells
    a client nothing it can use and shows the server's file layout to anyone.
    """
    model = entry.model
    if model is None:
        return EMBEDDED_MODEL_NAME if entry.kind == "chat" else EMBEDDED_EMBEDDING_MODEL_NAME
    path = Path(model).expanduser()
    if path.is_absolute() or model.startswith((".", "~")) or path.exists():
        return path.name if entry.name == model else entry.name
    return model  # a hub id, say "HuggingFaceTB/SmolLM2-135M-Instruct"


def served_models(
    entries: Sequence[ModelEntry], *, chat: Sequence[str], embedding: bool
) -> ModelRegistry:
    """The chat models `chat` (the chat engines' names), their LoRA adapters, and the
    embedding model when `embedding` (an embedding engine runs)."""
    by_name = {entry.name: entry for entry in entries}
    models = ModelRegistry()
    for base in chat:
        entry = by_name.get(base)
        root = base if entry is None else model_root(entry)
        models.add(ServedModel(base, "chat", root))
        # Listed as `vllm serve` lists its names after the first: each a model of its own.
        for alias in [] if entry is None else entry.aliases:
            models.add(ServedModel(alias, "chat", root, alias_of=base))
        for name in {} if entry is None else entry.lora_paths():
            # `root` is the adapter's name, as `vllm serve` lists it, never where it lies.
            models.add(ServedModel(name, "chat", name, parent=base))
    embedder = next((e for e in entries if e.kind == "embedding"), None)
    if embedding and embedder is not None:
        root = model_root(embedder)
        models.add(ServedModel(embedder.name, "embedding", root))
        for alias in embedder.aliases:
            models.add(ServedModel(alias, "embedding", root, alias_of=embedder.name))
    return models
