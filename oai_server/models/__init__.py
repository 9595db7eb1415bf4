"""The models one server serves, by the names clients use: see `registry`."""

from oai_server.models.registry import ModelKind, ModelRegistry, ServedModel

__all__ = ["ModelKind", "ModelRegistry", "ServedModel"]
