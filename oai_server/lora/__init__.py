"""Loading and unloading LoRA adapters at run time: vLLM's two endpoints, as a feature.

The adapters themselves are the core's (`models/adapters.py`: `--lora-modules`, and
`--lora-dir` by name); this feature only adds `/v1/load_lora_adapter` and
`/v1/unload_lora_adapter`, and only with `--allow-runtime-lora`.
"""

from __future__ import annotations

from oai_server.features import Feature
from oai_server.lora import routes
from oai_server.state import ServerState


def feature(core: ServerState) -> Feature[None]:
    """The run-time endpoints when allowed, on the core's adapters; else nothing (they
    answer 404)."""
    if core.adapters is None or not core.settings.allow_runtime_lora:
        return Feature(None)
    return Feature(None, routes.router(core.adapters, core.settings.max_request_bytes).routes)
