"""A request's image references into images, off the event loop, within bounds.

What one request may cost is bounded before it is spent: the images a request carries
inline (`data:` URLs, uploaded files) are sized from their headers before anything is
decoded or fetched, so a body of tiny bombs is refused at once; fetched images are sized
as they arrive. Together a request's images may declare `max_request_pixels`; a few are
fetched and decoded at a time (`max_request_fetches`), each decode holding its pixels
from the server's budget (`max_server_pixels`) in a small pool of threads, and each image
is shrunk to the model's size before it is kept.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import anyio

from oai_server.engine.types import ImageInput
from oai_server.media.budget import PixelBudget
from oai_server.media.errors import MediaError, MediaFetchError
from oai_server.media.fetch import MediaFetcher
from oai_server.media.images import data_url_bytes, decode_image, image_size
from oai_server.media.memory import release_freed

# Decoding is CPU-bound: more threads than cores only hold more pixels at once.
DECODERS = min(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class ImageRef:
    """An image a request points at: its URL (`data:`, `http(s)`, `file:`), or bytes the
    server already holds (an uploaded file), and the part of the request that named it."""

    param: str
    url: str | None = None
    data: bytes | None = None

    @property
    def inline(self) -> bool:
        """Whether the request carries the image itself (nothing to fetch or read)."""
        return self.data is not None or _scheme(self.url or "") == "data"


class _RequestPixels:
    """The pixels a request's images declare, summed as each is sized."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def add(self, size: tuple[int, int], param: str) -> int:
        """Count an image of `size` (width, height); its pixels, or `MediaError` naming
        `param` if the request's images now declare more than the limit."""
        pixels = size[0] * size[1]
        self.used += pixels
        if self.used > self.limit:
            raise MediaError(
                f"The images up to {param} declare {self.used} pixels, more than one request "
                f"may send ({self.limit}, --media-max-request-pixels).",
                param=param,
            )
        return pixels


class ImageLoader:
    """Turns `ImageRef`s into `ImageInput`s under the fetcher's policy."""

    def __init__(self, fetcher: MediaFetcher) -> None:
        self.fetcher = fetcher
        self._pixels = PixelBudget(fetcher.policy.max_server_pixels)
        self._decoders = anyio.CapacityLimiter(DECODERS)

    def check(self, refs: Sequence[ImageRef]) -> None:
        """What can be refused without fetching or decoding: a URL of another scheme."""
        for ref in refs:
            if ref.data is None and _scheme(ref.url or "") not in ("data", "http", "https", "file"):
                raise MediaFetchError(
                    f"The image URL at {ref.param} must be an http(s) or data: URL.",
                    param=ref.param,
                )

    async def load(self, refs: Sequence[ImageRef], max_side: int | None = None) -> list[ImageInput]:
        """Every image of `refs`, in order, its longest side at most `max_side` (the
        model's); the first failure (a 400 naming its part) wins."""
        request = _RequestPixels(self.fetcher.policy.max_request_pixels)
        inline = await anyio.to_thread.run_sync(self._inline, refs, request)
        images: list[ImageInput | None] = [None] * len(refs)
        at_once = anyio.CapacityLimiter(self.fetcher.policy.max_request_fetches)

        async def one(index: int, ref: ImageRef) -> None:
            async with at_once:
                if index in inline:
                    data, pixels = inline.pop(index)
                else:
                    data = await self._fetched(ref)
                    size = await anyio.to_thread.run_sync(image_size, data, ref.param)
                    pixels = request.add(size, ref.param)
                async with self._pixels.hold(pixels):
                    images[index] = await anyio.to_thread.run_sync(
                        _decode, data, ref.param, max_side, pixels, limiter=self._decoders
                    )

        try:
            async with anyio.create_task_group() as group:
                for index, ref in enumerate(refs):
                    group.start_soon(one, index, ref)
        except BaseExceptionGroup as failed:
            # The first image's failure, as if they had been loaded one by one.
            raise failed.exceptions[0] from None
        return [image for image in images if image is not None]

    def _inline(
        self, refs: Sequence[ImageRef], request: _RequestPixels
    ) -> dict[int, tuple[bytes, int]]:
        """The bytes and declared pixels of each image the request carries, by index;
        sized (headers only) before any image is decoded or fetched. Blocking."""
        limit = self.fetcher.policy.max_bytes
        found: dict[int, tuple[bytes, int]] = {}
        for index, ref in enumerate(refs):
            if ref.data is not None:
                if len(ref.data) > limit:
                    raise MediaError(
                        f"The image at {ref.param} is larger than the server's limit of "
                        f"{limit} bytes.",
                        param=ref.param,
                    )
                data = ref.data
            elif ref.inline:
                data = data_url_bytes((ref.url or "").strip(), ref.param, limit)
            else:
                continue
            found[index] = (data, request.add(image_size(data, ref.param), ref.param))
        return found

    async def _fetched(self, ref: ImageRef) -> bytes:
        url = (ref.url or "").strip()
        if _scheme(url) == "file":
            return await self._local(url, ref.param)
        return await self.fetcher.fetch(url, ref.param)

    async def _local(self, url: str, param: str) -> bytes:
        """A `file:` URL, only under `--allowed-local-media-path`."""
        root = self.fetcher.policy.allowed_local_path
        if root is None:
            raise MediaFetchError(
                f"The image URL at {param} is a file: URL, which needs the server started "
                "with --allowed-local-media-path.",
                param=param,
            )
        return await anyio.to_thread.run_sync(
            _read_local, url, root, self.fetcher.policy.max_bytes, param
        )


def _decode(data: bytes, param: str, max_side: int | None, pixels: int) -> ImageInput:
    """`decode_image`, then the memory its full-size pixels took given back. Blocking."""
    try:
        return decode_image(data, param, max_side)
    finally:
        release_freed(pixels)


def _scheme(url: str) -> str:
    return url.strip().split(":", 1)[0].lower() if ":" in url else ""


def _read_local(url: str, root: Path, limit: int, param: str) -> bytes:
    path = Path(unquote(urlparse(url).path)).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise MediaFetchError(
            f"The file at {param} is not a file under --allowed-local-media-path.",
            param=param,
        )
    if path.stat().st_size > limit:
        raise MediaError(
            f"The image at {param} is larger than the server's limit of {limit} bytes.",
            param=param,
        )
    return path.read_bytes()
