"""Every model this server serves, under the name a request's `model` field uses.

A served model is a chat model (chat, completions, responses, realtime) or an embedding
model (`/v1/embeddings`). An entry may also name a `parent`: a model served on another's
engine (a LoRA adapter on its base), listed as vLLM lists it. The registry answers "which
model is this name, and may it do this?", with the OpenAI error a client should see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from oai_server.errors import InvalidRequestError, ModelNotFoundError

ModelKind = Literal["chat", "embedding"]

# What each kind of model answers, for the error that sends a client to the right one.
_SERVES: dict[ModelKind, str] = {
    "chat": "chat and completions",
    "embedding": "embeddings (/v1/embeddings), rerank and score",
}


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model as clients see it."""

    name: str
    kind: ModelKind
    # What it is, for `/v1/models`' `root`: a hub id or a name, never a path on disk.
    root: str
    # The model whose engine serves this one (an adapter's base), else None.
    parent: str | None = None
    # The model this is another name of (`--served-model-name a b`: b is a's), else None.
    alias_of: str | None = None

    @property
    def engine_model(self) -> str:
        """The model whose engine answers this one: its own, its base's, or the aliased one's."""
        return self.parent or self.alias_of or self.name


class DuplicateModelError(ValueError):
    """Two models would answer to one name."""


class ModelRegistry:
    """The served models, in the order `/v1/models` lists them."""

    def __init__(self, models: Iterable[ServedModel] = ()) -> None:
        self._models: dict[str, ServedModel] = {}
        # Finds a model not yet served that a request may name (an adapter in --lora-dir,
        # loaded on first use); it raises the 400 for a name it must refuse.
        self.resolver: Callable[[str, str], ServedModel | None] | None = None
        for model in models:
            self.add(model)

    def add(self, model: ServedModel) -> None:
        """Serve `model`; its name must be new."""
        if model.name in self._models:
            raise DuplicateModelError(f"two models are served as '{model.name}'")
        self._models[model.name] = model

    def serves(self, name: str) -> bool:
        """Whether `name` is served now (not merely could be, on first use)."""
        return name in self._models

    def remove(self, name: str) -> None:
        """Serve `name` no more."""
        self._models.pop(name, None)

    def __iter__(self) -> Iterator[ServedModel]:
        return iter(self._models.values())

    def __contains__(self, name: object) -> bool:
        """Whether `name` is served, or would be on first use."""
        if name in self._models:
            return True
        return (
            isinstance(name, str)
            and self.resolver is not None
            and bool(self.resolver(name, "model"))
        )

    def first(self, kind: ModelKind) -> str | None:
        """The first model of `kind` served on an engine of its own (no adapter, no alias);
        None if none.
        The first chat model is the one a request without a model of its own gets."""
        return next(
            (m.name for m in self._models.values() if m.kind == kind and m.engine_model == m.name),
            None,
        )

    def get(self, name: str, *, param: str = "model") -> ServedModel:
        """The model served as `name`; else a 404 `model_not_found` naming it."""
        model = self._models.get(name)
        if model is None and self.resolver is not None:
            model = self.resolver(name, param)
        if model is None:
            served = ", ".join(f"'{m}'" for m in self._models) or "no model"
            raise ModelNotFoundError(
                f"The model '{name}' does not exist. This server serves {served}.", param=param
            )
        return model

    def find(
        self, name: str, kind: ModelKind, *, param: str = "model", wanted: str | None = None
    ) -> ServedModel:
        """The model served as `name`, which must be of `kind`; a 400 says which model
        does what when it is not (`wanted`: what was asked of it, if not all `kind` serves)."""
        model = self.get(name, param=param)
        if model.kind != kind:
            others = [m.name for m in self._models.values() if m.kind == kind]
            hint = f"; use '{others[0]}'" if others else ""
            article = "an" if model.kind[0] in "aeiou" else "a"
            raise InvalidRequestError(
                f"The model '{name}' is {article} {model.kind} model: it serves "
                f"{_SERVES[model.kind]}, not {wanted or _SERVES[kind]}{hint}.",
                param=param,
            )
        return model
