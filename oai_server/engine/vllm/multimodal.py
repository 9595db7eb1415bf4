"""Images through vLLM: how many a model takes, its placeholder, and a prompt's images
handed to the model's own processor (the renderer), which expands each placeholder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oai_server.engine.types import ImageInput
from oai_server.errors import InvalidRequestError


async def with_images(
    llm: Any,
    prompt_token_ids: list[int],
    images: Sequence[ImageInput],
    cache_salt: str | None = None,
    *,
    counting: bool = False,
) -> Any:
    """The prompt's tokens and images through vLLM's renderer: the model's own processor
    expands each image placeholder into the image's tokens. Each image goes with its
    digest as its uuid, so vLLM's processor cache and prefix cache know a repeated image
    (a later turn that repeats it reuses its blocks) without hashing its pixels again.
    `counting`: only to count the tokens, so vLLM's processor cache is left as it is
    (as vLLM's own /tokenize does)."""
    from vllm.renderers.inputs.preprocess import parse_model_prompt

    prompt: dict[str, Any] = {
        "prompt_token_ids": prompt_token_ids,
        "multi_modal_data": {"image": [image.pixels for image in images]},
        "multi_modal_uuids": {"image": [image.digest for image in images]},
    }
    if cache_salt is not None:
        prompt["cache_salt"] = cache_salt
    renderer = llm.renderer
    try:
        (engine_input,) = await renderer.render_cmpl_async(
            [parse_model_prompt(llm.model_config, prompt)],
            renderer.default_cmpl_tok_params,
            skip_mm_cache=counting,
        )
    except ValueError as exc:
        # The processor refuses what the model cannot take (too many images, say).
        raise InvalidRequestError(f"The images were refused: {exc}", param="messages") from exc
    return engine_input


def image_limit(model_config: Any) -> int:
    """Images a prompt may carry: 0 for a text-only model, else --limit-mm-per-prompt's."""
    if not model_config.is_multimodal_model:
        return 0
    try:
        return int(model_config.multimodal_config.get_limit_per_prompt("image"))
    except (AttributeError, ValueError):
        return 0


def image_placeholder(model_config: Any) -> str | None:
    """The model's own image placeholder (`<image>`, `<|image_pad|>`...), as vLLM's chat
    parsing writes it for templates that take content as a string."""
    if not image_limit(model_config):
        return None
    from vllm.model_executor.model_loader import get_model_cls

    model_cls: Any = get_model_cls(model_config)
    placeholder = model_cls.get_placeholder_str("image", 1)
    return None if placeholder is None else str(placeholder)


def image_max_side(model_config: Any) -> int | None:
    """The longest side the model's image processor resizes an image to: its `size`'s
    `longest_edge` (Idefics3, SmolVLM), with --mm-processor-kwargs over the model's own
    processor config. None where the processor says otherwise (a fixed height and width
    that ignores the aspect, a pixel count): images are then kept as decoded."""
    if not image_limit(model_config):
        return None
    config = _image_processor_config(model_config)
    config.update(getattr(model_config.multimodal_config, "mm_processor_kwargs", None) or {})
    size = config.get("size")
    side = size.get("longest_edge") if isinstance(size, dict) else None
    return side if isinstance(side, int) and side > 0 else None


def _image_processor_config(model_config: Any) -> dict[str, Any]:
    """The image processor's saved settings: `preprocessor_config.json`, or (as
    transformers 5 saves a processor) `processor_config.json`'s `image_processor`."""
    from vllm.transformers_utils.repo_utils import get_hf_file_to_dict

    for name in ("preprocessor_config.json", "processor_config.json"):
        found = get_hf_file_to_dict(name, model_config.model, model_config.revision) or {}
        nested = found.get("image_processor")
        config = nested if isinstance(nested, dict) else found
        if "size" in config:
            return dict(config)
    return {}
