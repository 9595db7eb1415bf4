"""Which models a server serves, and how each one's engine starts: `ModelEntry`s from the
flags (`--model`, repeatable, and `--embedding-model`) or from a `--models-file`.

The chat models come first, in the order given: the first is the one a request of the
chat page or a Realtime session without a model of its own gets, and the one LoRA flags
(`--lora-dir`, `--allow-runtime-lora`) serve adapters on.

They are worked out once, at start-up (`oai-server`, and each Ray Serve replica), and handed
to what builds the engines and the app: the names clients use are decided here alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator

from oai_server.engine.settings import EngineSettings, check_model_source
from oai_server.settings import (
    EMBEDDED_EMBEDDING_MODEL_NAME,
    EMBEDDED_MODEL_NAME,
    Settings,
    check_tool_call_parser,
)

# Flags that name models themselves: a models file names every model instead.
_MODEL_FLAGS = ("model", "served_model_name", "embedding_model", "lora_modules")


class ModelEntry(EngineSettings):
    """One model of a `--models-file`: the name clients use, what it serves, and its own
    engine settings (the engine flags' names in snake_case: `max_model_len`, `dtype`,
    `cpu_kvcache_space`, `cpu_threads_bind`, ...). A key left out takes its default, not
    the command line's flag; `model` left out is the embedded model of that kind."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The id clients use for this model.")
    kind: Literal["chat", "embedding"] = Field(
        "chat",
        description="chat (chat, completions, responses, realtime) or embedding (any pooling "
        "model: an embedding model, or a cross-encoder for rerank and score).",
    )
    aliases: list[str] = Field(
        default_factory=list,
        description="Other ids a request may name this model by, as the names after the "
        "first of vllm serve's --served-model-name a b (answers carry the name asked for).",
    )
    tool_call_parser: str | None = Field(
        None,
        description="This model's --tool-call-parser (auto, none or a vLLM parser's name); "
        "default: the server's.",
    )

    @field_validator("tool_call_parser")
    @classmethod
    def _tool_call_parser(cls, value: str | None) -> str | None:
        return None if value is None else check_tool_call_parser(value)

    @field_validator("model")
    @classmethod
    def _model_source(cls, value: str | None) -> str | None:
        return None if value is None else check_model_source(value)


class ModelsFileError(ValueError):
    """The models to serve cannot be served as given; the message names why, in one line."""


def first_chat(entries: Sequence[ModelEntry]) -> ModelEntry:
    """The chat model a request without a model of its own gets (`model_entries` always
    lists one)."""
    return next(entry for entry in entries if entry.kind == "chat")


def model_entries(settings: Settings) -> list[ModelEntry]:
    """Every model `settings` serves: chat models first, then the embedding model."""
    if settings.models_file is not None:
        entries = _read_models_file(settings, settings.models_file)
    else:
        entries = _from_flags(settings)
    names: set[str] = set()
    for entry in entries:
        for name in (entry.name, *entry.aliases):
            if name in names:
                raise ModelsFileError(f"two models are served as '{name}'")
            names.add(name)
    embedding = [e.name for e in entries if e.kind == "embedding"]
    if len(embedding) > 1:
        raise ModelsFileError(
            "one embedding model per server for now; "
            + " and ".join(f"'{n}'" for n in embedding)
            + " are both embedding models"
        )
    if not any(e.kind == "chat" for e in entries):
        raise ModelsFileError("no chat model is served; list at least one of kind chat")
    return entries


def _from_flags(settings: Settings) -> list[ModelEntry]:
    shared = settings.engine_options()
    # Adapters belong to one base model: the first --model's.
    no_lora = {"enable_lora": False, "lora_modules": []}
    entries: list[ModelEntry] = []
    for i, item in enumerate(settings.model or [""]):
        name, sep, source = item.partition("=")
        if not sep:
            name, source = "", item
        elif i == 0 and settings.served_model_name:
            raise ModelsFileError(
                f"the first --model is named twice: '{name}' (name=path) and "
                f"'{settings.served_model_name[0]}' (--served-model-name); give one"
            )
        given = settings.served_model_name if i == 0 else []
        if not name:
            name = given[0] if given else source or EMBEDDED_MODEL_NAME
        lora = {"enable_lora": settings.lora_enabled} if i == 0 else no_lora
        entry = {**shared, **lora, "name": name, "aliases": given[1:], "model": source or None}
        entries.append(_entry(entry))
    embedding = settings.embedding_model
    if embedding != "none":
        # vLLM's engine flags on the command line are the chat models': a models file
        # gives the embedding model its own.
        update: dict[str, Any] = {**shared, **no_lora, "kind": "embedding", "vllm_args": {}}
        update["name"] = _embedding_name(embedding)
        if embedding == EMBEDDED_EMBEDDING_MODEL_NAME:
            # The chat model's --dtype and --max-model-len are not the embedded model's.
            update.update(model=None, dtype="auto", max_model_len=None)
        else:
            update["model"] = embedding
        entries.append(_entry(update))
    return entries


def _embedding_name(model: str) -> str:
    """The id clients address `--embedding-model` by: a directory's name, never where it lies."""
    if model == EMBEDDED_EMBEDDING_MODEL_NAME:
        return model
    path = Path(model).expanduser()
    if path.is_absolute() or model.startswith((".", "~")) or path.exists():
        return path.name
    return model


def _entry(values: dict[str, Any]) -> ModelEntry:
    # Built from settings already checked: the values are valid as they are.
    return ModelEntry.model_construct(**values)


def _read_models_file(settings: Settings, path: Path) -> list[ModelEntry]:
    given = [f"--{f.replace('_', '-')}" for f in _MODEL_FLAGS if f in settings.model_fields_set]
    if given:
        raise ModelsFileError(
            f"--models-file lists every model; leave out {', '.join(given)} "
            "(put each model's settings in the file)"
        )
    where = f"--models-file {path}"
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelsFileError(f"{where}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ModelsFileError(f"{where}: not valid YAML{line}") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("models"), list):
        raise ModelsFileError(f"{where}: expected a mapping with a list under 'models'")
    unknown = sorted(set(loaded) - {"models"})
    if unknown:
        raise ModelsFileError(f"{where}: unknown key '{unknown[0]}' (only 'models')")
    entries: list[ModelEntry] = []
    for i, raw in enumerate(loaded["models"]):
        try:
            entry = ModelEntry.model_validate(_engine_keys_apart(raw, f"{where}: models[{i}]"))
        except ValidationError as exc:
            raise ModelsFileError(f"{where}: {_describe(exc, i)}") from None
        if entry.kind == "embedding" and entry.model == EMBEDDED_EMBEDDING_MODEL_NAME:
            entry = entry.model_copy(update={"model": None})  # the embedded one, by its name
        first_chat = entry.kind == "chat" and all(e.kind != "chat" for e in entries)
        if first_chat and settings.lora_enabled:
            # --lora-dir and --allow-runtime-lora serve adapters on the first chat model.
            entry = entry.model_copy(update={"enable_lora": True})
        entries.append(entry)
    return entries


def _engine_keys_apart(raw: Any, where: str) -> Any:
    """`raw` with keys that are vLLM's engine arguments (by name, `quantization: fp8`)
    moved under `vllm_args`; a key that is neither ours nor vLLM's stops the start."""
    if not isinstance(raw, dict):
        return raw
    theirs = {
        str(key).replace("-", "_"): value
        for key, value in raw.items()
        if key not in ModelEntry.model_fields
    }
    if not theirs:
        return raw
    from oai_server.engine.vllm.flags import engine_names

    unknown = sorted(set(theirs) - engine_names())
    if unknown:
        raise ModelsFileError(f"{where}.{unknown[0]}: unknown key")
    ours = {key: value for key, value in raw.items() if key in ModelEntry.model_fields}
    return {**ours, "vllm_args": {**ours.get("vllm_args", {}), **theirs}}


def _describe(exc: ValidationError, index: int) -> str:
    """The first problem of entry `index`, as `models[1].max_model_len: <why>`."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in (f"models[{index}]", *error["loc"]))
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key"
    if error["type"] == "missing":
        return f"{where}: missing"
    return f"{where}: {str(error['msg']).removeprefix('Value error, ')}"
