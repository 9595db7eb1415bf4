"""The paths answered to anyone: no API key asked, no limit counted.

Probes, scrapers and version checks must work without a key, and so must the chat page
and its files (they hold no secret; the page asks its user for a key). Everything else,
`/openapi.json` included, needs one when keys are configured. The app builds one
`OpenPaths` from the core's paths and the page's, and hands it to each middleware that
asks (the keys', the limits'), through its constructor, as Starlette configures one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# The core's own: health, version and metrics.
CORE_OPEN_PATHS = frozenset({"/health", "/version", "/metrics"})


@dataclass(frozen=True)
class OpenPaths:
    """Exact paths, and prefixes (a folder's files, `/ui/...`), open to all."""

    paths: frozenset[str] = CORE_OPEN_PATHS
    prefixes: tuple[str, ...] = ()

    def __call__(self, path: str) -> bool:
        """Whether `path` is answered without a key (and not counted against any limit)."""
        return path in self.paths or path.startswith(self.prefixes)

    def with_(self, paths: Iterable[str] = (), prefixes: Iterable[str] = ()) -> OpenPaths:
        """These open paths and those given."""
        return OpenPaths(self.paths | frozenset(paths), (*self.prefixes, *prefixes))
