"""The image fetcher: what a URL in a request may and may not make the server fetch.

Against a real HTTP server on loopback (which the fetcher refuses unless its host is
allowed), and a resolver that answers a private address for a public-looking name.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from oai_server.media.errors import MediaError, MediaFetchError
from oai_server.media.fetch import MediaFetcher, is_internal
from oai_server.media.loader import ImageLoader, ImageRef
from oai_server.media.policy import MediaPolicy
from tests.vision.images import BLUE, RED, data_url


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path
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


def loader(**policy: object) -> ImageLoader:
    return ImageLoader(MediaFetcher(MediaPolicy(**policy)))  # type: ignore[arg-type]


async def load_one(url: str, **policy: object) -> bytes:
    (image,) = await loader(**policy).load([ImageRef("messages[0].content[1]", url=url)])
    return image.pixels.tobytes()  # type: ignore[no-any-return]


async def refused(url: str, **policy: object) -> str:
    with pytest.raises(MediaError) as caught:
        await load_one(url, **policy)
    assert caught.value.param == "messages[0].content[1]"
    assert "messages[0].content[1]" in str(caught.value)
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
    ],
)
def test_internal_addresses(address: str) -> None:
    assert is_internal(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
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
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:{port}/red.png",
    ],
)
async def test_internal_urls_are_refused(port: int, url: str) -> None:
    message = await refused(url.format(port=port))
    assert "loopback, private or link-local" in message


async def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    async def private(host: str, port: int) -> list[str]:
        return ["10.0.0.7"]

    fetcher = MediaFetcher(MediaPolicy(), resolver=private)
    with pytest.raises(MediaFetchError, match="private"):
        await fetcher.fetch("https://images.example.com/cat.png", "messages[0].content[0]")


async def test_redirect_into_an_internal_address_is_refused(port: int) -> None:
    # localhost is allowed; the redirect goes to 127.0.0.1, which is not.
    url = f"http://localhost:{port}/redirect?to=http://127.0.0.1:{port}/red.png"
    await refused(url, allowed_domains={"localhost"})
    to_metadata = f"http://localhost:{port}/redirect?to=http://169.254.169.254/"
    await refused(to_metadata, allowed_domains={"localhost"})


async def test_redirects_within_allowed_hosts_are_followed_up_to_the_limit(port: int) -> None:
    url = f"http://localhost:{port}/redirect?to=/red.png"
    assert await load_one(url, allowed_domains={"localhost"}) == await load_one(data_url(RED))
    message = await refused(f"http://localhost:{port}/loop", allowed_domains={"localhost"})
    assert "redirected more than 3 times" in message


async def test_a_host_outside_allowed_domains_is_refused(port: int) -> None:
    message = await refused(f"http://localhost:{port}/red.png", allowed_domains={"example.com"})
    assert "--allowed-media-domains" in message


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


async def test_other_schemes_and_local_files(tmp_path: object, port: int) -> None:
    assert "http(s) or data:" in await refused("ftp://example.com/a.png")
    assert "--allowed-local-media-path" in await refused("file:///etc/passwd")


async def test_local_files_under_the_allowed_path(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    (root / "red.png").write_bytes(RED)
    got = await load_one(f"file://{root}/red.png", allowed_local_path=root)
    assert got == await load_one(data_url(RED))
    await refused(f"file://{root}/../../etc/passwd", allowed_local_path=root)


async def test_a_slow_server_times_out_without_blocking(port: int) -> None:
    import anyio

    async def stall(host: str, port: int) -> list[str]:
        await anyio.sleep(10)
        return ["93.184.216.34"]

    fetcher = MediaFetcher(MediaPolicy(timeout_s=1.0), resolver=stall)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        with pytest.raises(MediaFetchError, match=r"longer than 1 s"):
            await fetcher.fetch("https://slow.example.com/a.png", "messages[0].content[0]")
        group.cancel_scope.cancel()
    assert ticks > 0  # the loop went on serving other tasks meanwhile
