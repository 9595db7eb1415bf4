"""What a URL in a request may make the server fetch: vLLM's flags, and our limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# vLLM's default for `VLLM_IMAGE_FETCH_TIMEOUT` (seconds).
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_REDIRECTS = 3


@dataclass(frozen=True)
class MediaPolicy:
    """Where images may come from, and how much of them.

    `allowed_domains` and `allowed_local_path` are `vllm serve`'s
    `--allowed-media-domains` and `--allowed-local-media-path`: with domains named, a URL
    must name one of them, and only those may resolve to an internal address (a
    deployment's own image store, say); a `file:` URL must lie under the local path.
    """

    allowed_domains: frozenset[str] = field(default_factory=frozenset)
    allowed_local_path: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES
    max_redirects: int = DEFAULT_MAX_REDIRECTS

    @classmethod
    def of(
        cls,
        vllm_args: dict[str, Any],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
    ) -> MediaPolicy:
        """From the engine arguments the command line gave (vLLM's names)."""
        domains = vllm_args.get("allowed_media_domains") or ()
        local = vllm_args.get("allowed_local_media_path") or None
        return cls(
            allowed_domains=frozenset(d.lower().rstrip(".") for d in domains),
            allowed_local_path=Path(local).resolve() if local else None,
            timeout_s=timeout_s,
            max_bytes=max_bytes,
            max_redirects=max_redirects,
        )

    def domain_allowed(self, host: str) -> bool:
        """Whether `host` is one of the allowed domains (none named: any public host)."""
        return not self.allowed_domains or host.lower().rstrip(".") in self.allowed_domains

    def internal_allowed(self, host: str) -> bool:
        """Whether `host` may resolve to a loopback, private or link-local address: only
        when the operator named it among the allowed domains."""
        return host.lower().rstrip(".") in self.allowed_domains
