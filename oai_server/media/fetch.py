"""Fetch an image URL on a user's behalf without letting the URL reach inside.

A URL in a request is the user's, but the fetch is the server's: from inside the
deployment it could read a cloud's metadata service (169.254.169.254), an admin port on
loopback or any private service. So before each request, and after every redirect, the
name is resolved and each address it resolves to must be public (`is_global`) unless the
operator named the host in `--allowed-media-domains`; the address actually connected to
is checked again before a byte of the body is read (a name that resolved public and then
private, DNS rebinding, is caught there). Redirects are followed by hand, so each hop
gets the same checks. Size, time and redirect limits bound what one URL may cost; the
fetch is asynchronous, so a slow server delays only the request that named it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable

import anyio
import httpx

from oai_server.media.errors import MediaFetchError
from oai_server.media.policy import MediaPolicy

# Resolves (host, port) into the IP addresses a connection could go to.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_CHUNK = 64 * 1024
# A body an image store may label either way; the decoder decides what it is.
_TYPES = ("image/", "application/octet-stream")


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the system resolver answers (off the loop)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_internal(address: str) -> bool:
    """Loopback, private, link-local (metadata services), shared, reserved, multicast or
    unspecified: any address that is not a public unicast one."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


class MediaFetcher:
    """Fetches `http(s)` image URLs under a `MediaPolicy`."""

    def __init__(
        self,
        policy: MediaPolicy,
        *,
        resolver: Resolver = resolve,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = policy
        self._resolve = resolver
        self._transport = transport

    async def fetch(self, url: str, param: str) -> bytes:
        """The body of `url`; `MediaFetchError` naming `param` if it may not or cannot be had."""
        try:
            with anyio.fail_after(self.policy.timeout_s):
                return await self._follow(url, param)
        except TimeoutError:
            raise MediaFetchError(
                f"The image at {param} took longer than {self.policy.timeout_s:g} s to fetch.",
                param=param,
            ) from None
        except httpx.HTTPError as exc:
            raise MediaFetchError(
                f"The image at {param} could not be fetched: {type(exc).__name__}.", param=param
            ) from None

    async def _follow(self, url: str, param: str) -> bytes:
        # Proxies from the environment would connect on our behalf, past the address check.
        async with httpx.AsyncClient(
            transport=self._transport, trust_env=False, follow_redirects=False
        ) as client:
            current = httpx.URL(url)
            for _ in range(self.policy.max_redirects + 1):
                await self._check_target(current, param)
                async with client.stream("GET", current) as response:
                    self._check_peer(response, current.host, param)
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        current = current.join(location)
                        continue
                    return await self._body(response, param)
        raise MediaFetchError(
            f"The image URL at {param} redirected more than {self.policy.max_redirects} times.",
            param=param,
        )

    async def _check_target(self, url: httpx.URL, param: str) -> None:
        """Refuse a URL whose scheme, host or resolved addresses are not allowed."""
        if url.scheme not in ("http", "https") or not url.host:
            raise MediaFetchError(
                f"The image URL at {param} must be an http(s) or data: URL.", param=param
            )
        host = url.host
        if not self.policy.domain_allowed(host):
            raise MediaFetchError(
                f"The image URL at {param} names a host outside --allowed-media-domains.",
                param=param,
            )
        if self.policy.internal_allowed(host):
            return
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await self._resolve(host, port)
        except OSError:
            raise MediaFetchError(
                f"The host of the image URL at {param} does not resolve.", param=param
            ) from None
        if not addresses or any(is_internal(a) for a in addresses):
            raise _internal(param)

    def _check_peer(self, response: httpx.Response, host: str, param: str) -> None:
        """The address connected to must be public too (a name may resolve anew)."""
        if self.policy.internal_allowed(host):
            return
        stream = response.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if peer is not None and is_internal(str(peer[0])):
            raise _internal(param)

    async def _body(self, response: httpx.Response, param: str) -> bytes:
        if response.status_code != 200:
            raise MediaFetchError(
                f"The image URL at {param} answered HTTP {response.status_code}.", param=param
            )
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if not kind.startswith(_TYPES):
            raise MediaFetchError(
                f"The image URL at {param} returned {kind or 'no content type'}, not an image.",
                param=param,
            )
        limit = self.policy.max_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(param, limit)
        body = bytearray()
        async for chunk in response.aiter_bytes(_CHUNK):
            body += chunk
            if len(body) > limit:
                raise _too_large(param, limit)
        return bytes(body)


def _internal(param: str) -> MediaFetchError:
    return MediaFetchError(
        f"The image URL at {param} resolves to a loopback, private or link-local address, "
        "which the server does not fetch (--allowed-media-domains names hosts it may).",
        param=param,
    )


def _too_large(param: str, limit: int) -> MediaFetchError:
    return MediaFetchError(
        f"The image at {param} is larger than the server's limit of {limit} bytes.",
        param=param,
    )
