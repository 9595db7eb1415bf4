"""Fetch an image URL on a user's behalf without letting the URL reach inside.

A URL in a request is the user's, but the fetch is the server's: from inside the
deployment it could read a cloud's metadata service (169.254.169.254), an admin port on
loopback or any private service. So before each request, and after every redirect, the
name is resolved once, each address it resolves to must be public (`is_global`, with any
IPv4 address an IPv6 one embeds judged too) unless the operator named the host in
`--allowed-media-domains`, and the connection goes to the addresses that were checked: a
name that answers a public address to the check and a private one to the connect (DNS
rebinding) never gets the second question. The URL's host still names the server to TLS
(SNI, certificate) and in `Host`. A refused address is refused before any connection, so
its refusal is the same whatever listens there (no port scan). Redirects are followed by
hand, so each hop gets the same checks. Size, time and redirect limits bound what one URL
may cost; the fetch is asynchronous, so a slow server delays only the request that named it.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from functools import cache

import anyio
import httpcore
import httpx

from oai_server.media.errors import MediaFetchError
from oai_server.media.policy import MediaPolicy

# Resolves (host, port) into the IP addresses a connection could go to.
Resolver = Callable[[str, int], Awaitable[list[str]]]
# The transport of one hop: every connection it opens goes to one of the given addresses.
Dialer = Callable[[tuple[str, ...]], httpx.AsyncBaseTransport]

_CHUNK = 64 * 1024
# A body an image store may label either way; the decoder decides what it is.
_TYPES = ("image/", "application/octet-stream")
# IPv6 prefixes whose last 32 bits are an IPv4 address a packet is carried to: NAT64's
# well-known and local-use prefixes, SIIT's `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`.
_EMBEDDING = tuple(
    ipaddress.IPv6Network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96", "::/96")
)


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the system resolver answers (off the loop)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _embedded(ip: ipaddress.IPv6Address) -> Iterable[ipaddress.IPv4Address]:
    """The IPv4 addresses `ip` carries: 6to4's, Teredo's server and client, and those of
    the prefixes in `_EMBEDDING`."""
    if ip.sixtofour is not None:
        yield ip.sixtofour
    if ip.teredo is not None:
        yield from ip.teredo
    if any(ip in network for network in _EMBEDDING):
        yield ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def is_internal(address: str) -> bool:
    """Loopback, private, link-local (metadata services), shared, reserved, multicast or
    unspecified: any address that is not a public unicast one, or an IPv6 address that
    embeds such an IPv4 one (NAT64 reaches a VPC's private addresses, say)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    judged: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4-mapped address is the IPv4 one itself, on a dual-stack socket.
        judged = [ip.ipv4_mapped] if ip.ipv4_mapped is not None else [ip, *_embedded(ip)]
    return any(not a.is_global or a.is_multicast for a in judged)


class _PinnedNetwork(httpcore.AsyncNetworkBackend):
    """Connects to the checked addresses, in the resolver's order, the first that
    answers, whatever host httpcore asks for (as a connect by name tries each address
    of the name); TLS still gets the URL's host as its server name (httpcore passes it to
    `start_tls`)."""

    def __init__(self, addresses: tuple[str, ...]) -> None:
        self._addresses = addresses
        self._network = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        *others, last = self._addresses
        for address in others:
            try:
                return await self._network.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError:
                continue
        return await self._network.connect_tcp(last, port, timeout, local_address, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


@cache
def _tls() -> ssl.SSLContext:
    """httpx's default context (certifi's roots), made once: it takes milliseconds."""
    return httpx.create_ssl_context()


def pinned_transport(addresses: tuple[str, ...]) -> httpx.AsyncBaseTransport:
    """httpx's own transport, its connections dialled to `addresses`. httpx takes no
    network backend, so its connection pool is replaced by one built with ours."""
    transport = httpx.AsyncHTTPTransport(verify=_tls(), trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=_tls(), network_backend=_PinnedNetwork(addresses)
    )
    return transport


class MediaFetcher:
    """Fetches `http(s)` image URLs under a `MediaPolicy`."""

    def __init__(
        self, policy: MediaPolicy, *, resolver: Resolver = resolve, dial: Dialer = pinned_transport
    ) -> None:
        self.policy = policy
        self._resolve = resolver
        self._dial = dial
        # URLs fetched at once, server-wide: each holds a connection and up to max_bytes.
        self._at_once = anyio.CapacityLimiter(policy.max_server_fetches)

    async def fetch(self, url: str, param: str) -> bytes:
        """The body of `url`; `MediaFetchError` naming `param` if it may not or cannot be had.
        Waits its turn among the server's fetches first (`max_server_fetches`); the time
        limit counts from then."""
        target = _parse(url, param)
        try:
            async with self._at_once:
                with anyio.fail_after(self.policy.timeout_s):
                    return await self._follow(target, param)
        except TimeoutError:
            raise MediaFetchError(
                f"The image at {param} took longer than {self.policy.timeout_s:g} s to fetch.",
                param=param,
            ) from None
        except httpx.HTTPError as exc:
            raise MediaFetchError(
                f"The image at {param} could not be fetched: {type(exc).__name__}.", param=param
            ) from None

    async def _follow(self, current: httpx.URL, param: str) -> bytes:
        for _ in range(self.policy.max_redirects + 1):
            addresses = await self._check_target(current, param)
            # The transport itself, not a client: a client parses a redirect's `Location`
            # as it answers (raising on `data:...`), and takes proxies from the
            # environment, which would connect on our behalf past the check.
            async with self._dial(addresses) as transport:
                response = await transport.handle_async_request(httpx.Request("GET", current))
                try:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        current = _parse(location, param, base=current)
                        continue
                    return await self._body(response, param)
                finally:
                    await response.aclose()
        raise MediaFetchError(
            f"The image URL at {param} redirected more than {self.policy.max_redirects} times.",
            param=param,
        )

    async def _check_target(self, url: httpx.URL, param: str) -> tuple[str, ...]:
        """The addresses to connect to for `url`; refuse a URL whose host or resolved
        addresses are not allowed."""
        host = url.host
        if not self.policy.domain_allowed(host):
            raise MediaFetchError(
                f"The image URL at {param} names a host outside --allowed-media-domains.",
                param=param,
            )
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await self._resolve(host, port)
        except OSError:
            raise MediaFetchError(
                f"The host of the image URL at {param} does not resolve.", param=param
            ) from None
        if not addresses:
            raise _internal(param)
        if not self.policy.internal_allowed(host) and any(is_internal(a) for a in addresses):
            raise _internal(param)
        return tuple(addresses)

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


def _parse(url: str, param: str, base: httpx.URL | None = None) -> httpx.URL:
    """`url` (joined onto `base`, a redirect's `Location`), or `MediaFetchError`: a
    malformed URL (`http://[::1`, a NUL) or a redirect to a `data:` or `javascript:` URL is
    the request's fault, not the server's."""
    try:
        parsed = httpx.URL(url) if base is None else base.join(url)
    except httpx.InvalidURL:
        if base is not None:
            raise _off_http(param) from None
        raise MediaFetchError(
            f"The image URL at {param} is not a valid URL.", param=param
        ) from None
    if parsed.scheme in ("http", "https") and parsed.host:
        return parsed
    if base is not None:
        raise _off_http(param)
    raise MediaFetchError(f"The image URL at {param} must be an http(s) or data: URL.", param=param)


def _off_http(param: str) -> MediaFetchError:
    return MediaFetchError(
        f"The image URL at {param} redirected to a URL that is not a valid http(s) one.",
        param=param,
    )


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
