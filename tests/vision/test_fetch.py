"""The image fetcher: what a URL in a request may and may not make the server fetch.

Against a real HTTP server on loopback that records every request it gets, with no
`--allowed-media-domains` unless a test is about them: each refusal must come from the
address check it names, so each test fails when that check is taken out. A name the
tests call public resolves (through the test's resolver) to a public address, and its
connections go to a scripted transport, never out of this machine.
"""

from __future__ import annotations

import http.server
import struct
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from oai_server.media.errors import MediaError, MediaFetchError
from oai_server.media.fetch import MediaFetcher, Resolver, is_internal, pinned_transport, resolve
from oai_server.media.loader import ImageLoader, ImageRef
from oai_server.media.policy import MediaPolicy
from tests.vision.images import BLUE, RED, data_url

PART = "messages[0].content[1]"
# A public address the scripted transport stands in for, and a name resolving to it.
PUBLIC = "93.184.216.34"
PUBLIC_HOST = "images.example.com"
INTERNAL = "loopback, private or link-local"


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        path = self.path
        self.hits.append((path, self.headers.get("Host", "")))
        if path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", path.removeprefix("/redirect?to="))
            self.end_headers()
            return
        if path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.end_headers()
            return
        body, kind = {
            "/red.png": (RED, "image/png"),
            "/blue.png": (BLUE, "image/png"),
            "/page.html": (b"<html></html>", "text/html"),
            "/big.png": (b"\0" * 5000, "image/png"),
            "/broken.png": (b"not an image at all", "image/png"),
        }.get(path, (b"", ""))
        if not kind:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def hits() -> list[tuple[str, str]]:
    """The (path, Host) of each request the local server gets during the test."""
    _Handler.hits.clear()
    return _Handler.hits


def redirecting_to(location: str) -> Callable[[tuple[str, ...]], httpx.AsyncBaseTransport]:
    """A dialer: the public address answers a redirect to `location`; any other address
    is dialled for real (pinned, as the server does)."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": location})

    def dial(addresses: tuple[str, ...]) -> httpx.AsyncBaseTransport:
        return httpx.MockTransport(answer) if PUBLIC in addresses else pinned_transport(addresses)

    return dial


async def public_names(host: str, port: int) -> list[str]:
    return [PUBLIC] if host == PUBLIC_HOST else await resolve(host, port)


def loader(
    resolver: Resolver = public_names,
    dial: Callable[[tuple[str, ...]], httpx.AsyncBaseTransport] = pinned_transport,
    **policy: object,
) -> ImageLoader:
    fetcher = MediaFetcher(MediaPolicy(**policy), resolver=resolver, dial=dial)  # type: ignore[arg-type]
    return ImageLoader(fetcher)


async def load_one(url: str, **options: object) -> bytes:
    (image,) = await loader(**options).load([ImageRef(PART, url=url)])  # type: ignore[arg-type]
    return image.pixels.tobytes()  # type: ignore[no-any-return]


async def refused(url: str, **options: object) -> str:
    with pytest.raises(MediaError) as caught:
        await load_one(url, **options)
    assert caught.value.param == PART
    assert PART in str(caught.value)
    return str(caught.value)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.9",
        "172.16.5.5",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
        "fd00::1",
        # IPv6 forms that carry an internal IPv4 address to where it lives:
        "64:ff9b::a9fe:a9fe",  # NAT64: the metadata address
        "64:ff9b::10.0.0.1",
        "64:ff9b:1::a00:1",  # NAT64's local-use prefix
        "2002:a9fe:a9fe::1",  # 6to4
        "2002:7f00:1::",
        "::127.0.0.1",  # IPv4-compatible
        "::169.254.169.254",
        "::ffff:0:127.0.0.1",  # SIIT
        "::ffff:0:a9fe:a9fe",
    ],
)
def test_internal_addresses(address: str) -> None:
    assert is_internal(address)


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses(address: str) -> None:
    assert not is_internal(address)


async def test_allowed_host_is_fetched_same_as_data_url(port: int) -> None:
    fetched = await load_one(f"http://localhost:{port}/red.png", allowed_domains={"localhost"})
    assert fetched == await load_one(data_url(RED))
    assert fetched != await load_one(data_url(BLUE))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/red.png",
        "http://localhost:{port}/red.png",
        "http://[::1]:{port}/red.png",
        "http://[::ffff:127.0.0.1]:{port}/red.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    ],
)
async def test_internal_urls_are_refused(port: int, url: str, hits: list[object]) -> None:
    assert INTERNAL in await refused(url.format(port=port))
    assert hits == []


async def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    async def private(host: str, port: int) -> list[str]:
        return ["10.0.0.7"]

    fetcher = MediaFetcher(MediaPolicy(), resolver=private)
    with pytest.raises(MediaFetchError, match=INTERNAL):
        await fetcher.fetch("https://images.example.com/cat.png", "messages[0].content[0]")


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/red.png",
        "http://localhost:{port}/red.png",
        "http://[::ffff:127.0.0.1]:{port}/red.png",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
async def test_a_redirect_into_an_internal_address_is_refused(
    port: int, target: str, hits: list[object]
) -> None:
    dial = redirecting_to(target.format(port=port))
    message = await refused(f"http://{PUBLIC_HOST}/cat.png", dial=dial)
    assert INTERNAL in message
    assert hits == []


async def test_the_connection_goes_to_the_address_that_was_checked(
    port: int, hits: list[tuple[str, str]]
) -> None:
    # A name that answers public to the check and loopback to a second question (DNS
    # rebinding): the second question is never asked, nothing reaches the local server.
    answers = iter([[PUBLIC], ["127.0.0.1"]])

    async def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    dialled: list[tuple[str, ...]] = []

    def dial(addresses: tuple[str, ...]) -> httpx.AsyncBaseTransport:
        dialled.append(addresses)
        return httpx.MockTransport(lambda request: httpx.Response(404))

    message = await refused(f"http://localhost:{port}/red.png", resolver=rebinding, dial=dial)
    assert "HTTP 404" in message
    assert dialled == [(PUBLIC,)]
    assert hits == []


async def test_a_pinned_connection_keeps_the_urls_host(
    port: int, hits: list[tuple[str, str]]
) -> None:
    # An allowed internal name, resolved by the test: the server's real transport dials
    # the answer, and the request still names the URL's host.
    async def to_loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    url = f"http://images.internal.test:{port}/red.png"
    got = await load_one(url, resolver=to_loopback, allowed_domains={"images.internal.test"})
    assert got == await load_one(data_url(RED))
    assert hits == [("/red.png", f"images.internal.test:{port}")]


async def test_each_checked_address_is_tried_in_turn(
    port: int, hits: list[tuple[str, str]]
) -> None:
    # As a connect by name would: nothing listens on 127.0.0.2, the next address answers.
    async def two(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.1"]

    url = f"http://images.internal.test:{port}/red.png"
    got = await load_one(url, resolver=two, allowed_domains={"images.internal.test"})
    assert got == await load_one(data_url(RED))
    assert [path for path, _ in hits] == ["/red.png"]


async def test_a_refused_address_answers_the_same_whatever_listens_there(port: int) -> None:
    # Rebinding to an open and to a closed local port: had either been connected to,
    # the two would differ (a refusal after the answer, a connection error).
    closed = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    closed_port = closed.server_address[1]
    closed.server_close()

    def rebinding() -> Callable[[str, int], Awaitable[list[str]]]:
        answers = iter([[PUBLIC], ["127.0.0.1"]])

        async def resolver(host: str, port: int) -> list[str]:
            return next(answers)

        return resolver

    dial = redirecting_to("/elsewhere.png")
    messages = {
        await refused(f"http://localhost:{p}/red.png", resolver=rebinding(), dial=dial)
        for p in (port, closed_port)
    }
    assert len(messages) == 1
    assert INTERNAL in messages.pop()


async def test_redirects_within_allowed_hosts_are_followed_up_to_the_limit(port: int) -> None:
    url = f"http://localhost:{port}/redirect?to=/red.png"
    assert await load_one(url, allowed_domains={"localhost"}) == await load_one(data_url(RED))
    message = await refused(f"http://localhost:{port}/loop", allowed_domains={"localhost"})
    assert "redirected more than 3 times" in message


async def test_a_host_outside_allowed_domains_is_refused(port: int) -> None:
    message = await refused(f"http://localhost:{port}/red.png", allowed_domains={"example.com"})
    assert "--allowed-media-domains" in message


@pytest.mark.parametrize("location", ["data:image/png;base64,AAAA", "javascript:x", "http://[::1"])
async def test_a_redirect_out_of_http_is_a_400(location: str) -> None:
    message = await refused(f"http://{PUBLIC_HOST}/a.png", dial=redirecting_to(location))
    assert "redirected to a URL that is not a valid http(s) one" in message


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://[::1]:x/a.png", "http://exa\0mple.com/a.png"]
)
async def test_a_malformed_url_is_a_400(url: str) -> None:
    assert "is not a valid URL" in await refused(url)


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width`x`height` pixels and carries almost none."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


async def test_a_decompression_bomb_is_a_400_naming_its_size() -> None:
    # 2.5 gigapixels declared: Pillow itself refuses it (DecompressionBombError).
    message = await refused(data_url(png_header(50_000, 50_000)))
    assert "more pixels than Pillow opens, more than the server decodes" in message
    # Above our bound and below Pillow's: refused by ours, naming its size.
    message = await refused(data_url(png_header(9_000, 8_000)))
    assert "declares 9000x8000 pixels, more than the server decodes" in message


async def test_size_type_and_decoding_are_checked(port: int) -> None:
    allowed = {"allowed_domains": {"localhost"}}
    root = f"http://localhost:{port}"
    assert "larger than" in await refused(f"{root}/big.png", max_bytes=1000, **allowed)
    assert "text/html" in await refused(f"{root}/page.html", **allowed)
    assert "could not be decoded" in await refused(f"{root}/broken.png", **allowed)
    assert "HTTP 404" in await refused(f"{root}/missing.png", **allowed)
    assert "larger than" in await refused(data_url(RED), max_bytes=10)
    assert "not valid base64" in await refused("data:image/png;base64,@@@@")
    assert "could not be decoded" in await refused(data_url(b"GIF89a-broken"))


async def test_other_schemes_and_local_files() -> None:
    assert "http(s) or data:" in await refused("ftp://example.com/a.png")
    assert "--allowed-local-media-path" in await refused("file:///etc/passwd")


async def test_local_files_under_the_allowed_path(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "red.png").write_bytes(RED)
    (outside / "blue.png").write_bytes(BLUE)
    (root / "link.png").symlink_to(outside / "blue.png")
    got = await load_one(f"file://{root}/red.png", allowed_local_path=root)
    assert got == await load_one(data_url(RED))
    # A real image outside the root, by `..` and by a symlink inside it.
    for url in (f"file://{root}/../outside/blue.png", f"file://{root}/link.png"):
        message = await refused(url, allowed_local_path=root)
        assert "not a file under --allowed-local-media-path" in message


async def test_a_slow_server_times_out_without_blocking() -> None:
    """A server that takes the request and never answers: the fetch gives up after its
    timeout, and the event loop runs other tasks every few milliseconds meanwhile."""
    import socket
    import time

    import anyio

    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []

    def take() -> None:  # accept, read the request, answer nothing
        connection, _ = listener.accept()
        taken.append(connection)
        connection.recv(65536)

    threading.Thread(target=take, daemon=True).start()
    port = listener.getsockname()[1]
    policy = MediaPolicy(allowed_domains=frozenset({"localhost"}), timeout_s=1.0)
    fetcher = MediaFetcher(policy)
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            started = time.monotonic()
            with pytest.raises(MediaFetchError, match=r"longer than 1 s"):
                await fetcher.fetch(f"http://localhost:{port}/a.png", "messages[0].content[0]")
            waited = time.monotonic() - started
            group.cancel_scope.cancel()
    finally:
        for connection in [*taken, listener]:
            connection.close()
    # Ticks 10 ms apart all along: the fetch never held the loop (one blocking second
    # would show as a gap of a second).
    assert len(gaps) > 30
    assert max(gaps) < 0.5, max(gaps)
    assert taken  # the server had the request: its silence, not a lookup, timed out
    assert 0.9 < waited < 3.0
