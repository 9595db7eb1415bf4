"""LoRA adapters, as the server sees them before an engine loads one.

An adapter is a directory in PEFT layout: `adapter_config.json` (`peft_type` LORA, its
rank `r`) and its weights (`adapter_model.safetensors`, or `.bin`). What can be told from
the directory is checked here, so a bad one is a clear 400 naming the field and never
reaches the engine; what only loading tells (weights shaped for another base model, a
corrupt file) the engine reports when it loads the adapter, before any request uses it.
"""

from __future__ import annotations

import json
from pathlib import Path

from oai_server.errors import InvalidRequestError

_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def check_adapter(path: str, max_rank: int, *, param: str) -> None:
    """Raise `InvalidRequestError` (naming `param`) unless `path` holds a LoRA adapter
    the engine can serve: rank at most `max_rank`."""
    directory = Path(path)
    config_file = directory / "adapter_config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidRequestError(
            "This is not a LoRA adapter: it has no adapter_config.json.", param=param
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidRequestError(
            "The adapter's adapter_config.json cannot be read as JSON.", param=param
        ) from None
    if not isinstance(config, dict) or str(config.get("peft_type", "")).upper() != "LORA":
        raise InvalidRequestError(
            "This is not a LoRA adapter: adapter_config.json's peft_type is not LORA.",
            param=param,
        )
    rank = config.get("r")
    if not isinstance(rank, int) or rank < 1:
        raise InvalidRequestError("The adapter's config has no valid rank 'r'.", param=param)
    if rank > max_rank:
        raise InvalidRequestError(
            f"The adapter's rank {rank} exceeds this server's --max-lora-rank {max_rank}.",
            param=param,
        )
    if not any((directory / name).is_file() for name in _WEIGHTS):
        raise InvalidRequestError(
            "The adapter has no weights (adapter_model.safetensors).", param=param
        )
