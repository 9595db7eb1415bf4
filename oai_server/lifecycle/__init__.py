"""The server's life after start: draining on SIGTERM, exiting when the engine dies."""

from oai_server.lifecycle.middleware import LifecycleMiddleware
from oai_server.lifecycle.state import Lifecycle, Phase

__all__ = ["Lifecycle", "LifecycleMiddleware", "Phase"]
