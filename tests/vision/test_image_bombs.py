"""What images may cost: pixels a request declares, pixels decoded at once, fetches at
once, the size an image is kept at, and a Message Batch that fetches nothing at creation.

A "bomb" here is an 8192x8192 1-bit PNG of zeros: 8 KB that decodes into 64 Mi pixels.
"""

from __future__ import annotations

import gc
import http.server
import io
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from PIL import Image

from oai_server.engine.fake import FakeEngine
from oai_server.media.budget import PixelBudget
from oai_server.media.fetch import MediaFetcher
from oai_server.media.loader import ImageLoader, ImageRef
from oai_server.media.policy import MediaPolicy
from tests.unit.conftest import MODEL, serve
from tests.vision.images import data_url, png, user_with_images


@cache
def bomb() -> str:
    out = io.BytesIO()
    Image.new("1", (8192, 8192)).save(out, format="PNG", optimize=True)
    return data_url(out.getvalue())


def chat(*urls: str) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 2, "messages": [user_with_images("What?", *urls)]}


async def test_a_request_declaring_too_many_pixels_is_refused_by_the_image_that_goes_over() -> None:
    engine = FakeEngine(image_limit=8)
    async with serve(engine) as client:
        one = await client.post("/v1/chat/completions", json=chat(bomb()))
        assert one.status_code == 200, one.text
        answer = await client.post("/v1/chat/completions", json=chat(*[bomb()] * 3))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    # Two bombs are the default's 128 Mi pixels; the third goes over.
    assert error["param"] == "messages[0].content[2]"
    assert "--media-max-request-pixels" in error["message"]
    assert len(engine.calls) == 1


async def test_a_body_of_tiny_bombs_is_refused_at_once() -> None:
    # Just under the 4 MiB a body may have: 379 bombs, declaring 24 Gi pixels,
    # within vLLM's default of 999 images a prompt. None of them is decoded.
    count = (4 * 1024 * 1024 - 4096) // (len(bomb()) + 64)
    engine = FakeEngine(image_limit=999)
    async with serve(engine) as client:
        began = time.monotonic()
        answer = await client.post("/v1/chat/completions", json=chat(*[bomb()] * count))
        took = time.monotonic() - began
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "messages[0].content[2]"
    assert took < 3.0, took
    assert engine.calls == []


async def test_images_are_kept_at_the_size_the_model_takes() -> None:
    engine = FakeEngine(image_limit=2, image_max_side=64)
    wide, small = png((0, 128, 255), (640, 320)), png((9, 9, 9), (40, 30))
    async with serve(engine) as client:
        answer = await client.post(
            "/v1/chat/completions", json=chat(data_url(wide), data_url(small))
        )
    assert answer.status_code == 200, answer.text
    kept = [image.pixels for image in engine.calls[-1].options.images]
    assert [image.size for image in kept] == [(64, 32), (40, 30)]
    assert kept[0].getpixel((10, 10)) == (0, 128, 255)


async def test_the_server_decodes_no_more_pixels_at_once_than_its_budget() -> None:
    budget = PixelBudget(100)
    held: list[int] = []
    peak = 0

    async def decode(pixels: int) -> None:
        nonlocal peak
        async with budget.hold(pixels):
            share = min(pixels, budget.total)
            held.append(share)
            peak = max(peak, sum(held))
            await anyio.sleep(0.05)
            held.remove(share)

    async with anyio.create_task_group() as group:
        for pixels in (60, 60, 30, 500):  # one larger than the budget holds all of it
            group.start_soon(decode, pixels)
    assert peak <= 100
    assert budget.free == 100


class _Slow(http.server.BaseHTTPRequestHandler):
    """Serves a small PNG after 0.2 s, counting the requests it serves at once; each
    path is recorded once served."""

    lock = threading.Lock()
    now: ClassVar[list[int]] = [0]
    peak: ClassVar[list[int]] = [0]
    paths: ClassVar[list[str]] = []
    body = png((200, 10, 10))

    def do_GET(self) -> None:
        with self.lock:
            self.now[0] += 1
            self.peak[0] = max(self.peak[0], self.now[0])
        time.sleep(0.2)
        with self.lock:
            self.now[0] -= 1
            self.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_images() -> Iterator[str]:
    _Slow.now[0] = _Slow.peak[0] = 0
    _Slow.paths.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_fetches_at_once_are_bounded_per_request_and_per_server(slow_images: str) -> None:
    policy = MediaPolicy(
        allowed_domains=frozenset({"localhost"}), max_request_fetches=2, max_server_fetches=3
    )
    loader = ImageLoader(MediaFetcher(policy))
    refs = [ImageRef(f"messages[0].content[{i}]", url=f"{slow_images}/{i}.png") for i in range(6)]
    assert len(await loader.load(refs)) == 6
    assert _Slow.peak[0] == 2
    _Slow.peak[0] = 0
    async with anyio.create_task_group() as group:
        for _ in range(3):  # six at once, were each request's two not held by the server's three
            group.start_soon(loader.load, refs[:2])
    assert _Slow.peak[0] == 3


def test_a_message_batch_fetches_its_images_when_its_line_runs(
    tmp_path: Path, slow_images: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.anthropic.conftest import KEY, client, server

    # As --allowed-media-domains localhost would (that flag's check imports vLLM: 30 s).
    allowed = MediaPolicy(allowed_domains=frozenset({"localhost"}))
    monkeypatch.setattr("oai_server.app.media_policy", lambda settings: allowed)
    engine = FakeEngine(image_limit=2, image_tokens=3)
    settings = {"store_url": f"sqlite:///{tmp_path / 'store.db'}", "batch_idle_seconds": 0}
    image = {"type": "image", "source": {"type": "url", "url": f"{slow_images}/cat.png"}}
    params = {
        "model": MODEL,
        "max_tokens": 4,
        "messages": [{"role": "user", "content": [image, {"type": "text", "text": "Cat?"}]}],
    }
    with server(engine, **settings) as root:
        sdk = client(root, api_key=KEY)
        created = sdk.messages.batches.create(requests=[{"custom_id": "a", "params": params}])
        fetched_at_creation = list(_Slow.paths)
        deadline = time.monotonic() + 30
        while sdk.messages.batches.retrieve(created.id).processing_status != "ended":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        (result,) = list(sdk.messages.batches.results(created.id))
    assert result.result.type == "succeeded", result
    assert _Slow.paths == ["/cat.png"]
    # The line runs in the background, and its fetch takes 0.2 s: none had been served
    # when the create call answered, unless creation fetched it itself.
    assert fetched_at_creation == []


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def test_the_memory_of_a_decode_returns_after_the_answer() -> None:
    engine = FakeEngine(image_limit=2, image_max_side=64)
    async with serve(engine) as client:
        before = _rss_mib()
        answer = await client.post("/v1/chat/completions", json=chat(bomb(), bomb()))
        assert answer.status_code == 200, answer.text
        engine.calls.clear()  # the fake's record of the call holds its images
        gc.collect()
        # Two bombs decoded at full size took about 250 MiB; kept, each is 64x64.
        assert _rss_mib() - before < 64


def _responses(url: str) -> dict[str, Any]:
    content = [{"type": "input_image", "image_url": url}, {"type": "input_text", "text": "What?"}]
    return {"model": MODEL, "max_output_tokens": 2, "input": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [("/v1/chat/completions", chat), ("/v1/responses", _responses)],
)
def test_a_batch_line_fetches_its_images_when_it_runs(
    tmp_path: Path,
    slow_images: str,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    body: Callable[[str], dict[str, Any]],
) -> None:
    from tests.batch.helpers import read_lines, upload, wait
    from tests.live import serve as serve_live
    from tests.store.conftest import make_app, sdk

    allowed = MediaPolicy(allowed_domains=frozenset({"localhost"}))
    monkeypatch.setattr("oai_server.app.media_policy", lambda settings: allowed)
    engine = FakeEngine(image_limit=2, image_tokens=3)
    app = make_app(f"sqlite:///{tmp_path / 'store.db'}", engine, batch_idle_seconds=0)
    line = {
        "custom_id": "a",
        "method": "POST",
        "url": endpoint,
        "body": body(f"{slow_images}/cat.png"),
    }
    with serve_live(app) as base, sdk(base) as client:
        batch = client.batches.create(
            input_file_id=upload(client, [line]),
            endpoint=endpoint,
            completion_window="24h",
        )
        fetched_at_creation = list(_Slow.paths)
        done = wait(client, batch.id)
        (output,) = read_lines(client, done.output_file_id)
    assert output["response"]["status_code"] == 200, output
    assert _Slow.paths == ["/cat.png"]
    assert fetched_at_creation == []
