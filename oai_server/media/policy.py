"""What a URL in a request may make the server fetch: vLLM's flags, and our limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# vLLM's default for `VLLM_IMAGE_FETCH_TIMEOUT` (seconds).
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_REDIRECTS = 3
# Two of the largest images the server decodes (64 Mpx each), or ten 12-megapixel photos.
DEFAULT_MAX_REQUEST_PIXELS = 128 * 1024 * 1024
# Decoded at full size at once, server-wide: 1 GiB of RGB pixels (4 bytes each).
DEFAULT_MAX_SERVER_PIXELS = 256 * 1024 * 1024
DEFAULT_MAX_REQUEST_FETCHES = 4
DEFAULT_MAX_SERVER_FETCHES = 32


@dataclass(frozen=True)
class MediaPolicy:
    """Where images may come from, and how much of them.

    `allowed_domains` and `allowed_local_path` are `vllm serve`'s
    `--allowed-media-domains` and `--allowed-local-media-path`: with domains named, a URL
    must name one of them, and only those may resolve to an internal address (a
    deployment's own image store, say); a `file:` URL must lie under the local path.
    The pixel bounds count what images declare (width x height) before they are decoded:
    a request's images together, and the images being decoded at once, server-wide; the
    fetch bounds, URLs fetched at once for one request and for the server.
    """

    allowed_domains: frozenset[str] = field(default_factory=frozenset)
    allowed_local_path: Path | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    max_request_pixels: int = DEFAULT_MAX_REQUEST_PIXELS
    max_server_pixels: int = DEFAULT_MAX_SERVER_PIXELS
    max_request_fetches: int = DEFAULT_MAX_REQUEST_FETCHES
    max_server_fetches: int = DEFAULT_MAX_SERVER_FETCHES

    @classmethod
    def of(cls, vllm_args: dict[str, Any], **limits: Any) -> MediaPolicy:
        """From the engine arguments the command line gave (vLLM's names), with `limits`
        (this class's other fields)."""
        domains = vllm_args.get("allowed_media_domains") or ()
        local = vllm_args.get("allowed_local_media_path") or None
        return cls(
            allowed_domains=frozenset(d.lower().rstrip(".") for d in domains),
            allowed_local_path=Path(local).resolve() if local else None,
            **limits,
        )

    def domain_allowed(self, host: str) -> bool:
        """Whether `host` is one of the allowed domains (none named: any public host)."""
        return not self.allowed_domains or host.lower().rstrip(".") in self.allowed_domains

    def internal_allowed(self, host: str) -> bool:
        """Whether `host` may resolve to a loopback, private or link-local address: only
        when the operator named it among the allowed domains."""
        return host.lower().rstrip(".") in self.allowed_domains
