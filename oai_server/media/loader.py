"""A request's image references into images: concurrently, off the event loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import anyio

from oai_server.engine.types import ImageInput
from oai_server.media.errors import MediaError, MediaFetchError
from oai_server.media.fetch import MediaFetcher
from oai_server.media.images import data_url_bytes, decode_image


@dataclass(frozen=True)
class ImageRef:
    """An image a request points at: its URL (`data:`, `http(s)`, `file:`), or bytes the
    server already holds (an uploaded file), and the part of the request that named it."""

    param: str
    url: str | None = None
    data: bytes | None = None


class ImageLoader:
    """Turns `ImageRef`s into `ImageInput`s under the fetcher's policy."""

    def __init__(self, fetcher: MediaFetcher) -> None:
        self.fetcher = fetcher

    async def load(self, refs: Sequence[ImageRef]) -> list[ImageInput]:
        """Every image of `refs`, in order; the first failure (a 400 naming its part) wins."""
        images: list[ImageInput | None] = [None] * len(refs)

        async def one(index: int, ref: ImageRef) -> None:
            data = await self._bytes(ref)
            images[index] = await anyio.to_thread.run_sync(decode_image, data, ref.param)

        try:
            async with anyio.create_task_group() as group:
                for index, ref in enumerate(refs):
                    group.start_soon(one, index, ref)
        except BaseExceptionGroup as failed:
            # The first image's failure, as if they had been loaded one by one.
            raise failed.exceptions[0] from None
        return [image for image in images if image is not None]

    async def _bytes(self, ref: ImageRef) -> bytes:
        policy = self.fetcher.policy
        if ref.data is not None:
            if len(ref.data) > policy.max_bytes:
                raise MediaError(
                    f"The image at {ref.param} is larger than the server's limit of "
                    f"{policy.max_bytes} bytes.",
                    param=ref.param,
                )
            return ref.data
        url = (ref.url or "").strip()
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme == "data":
            return await anyio.to_thread.run_sync(data_url_bytes, url, ref.param, policy.max_bytes)
        if scheme == "file":
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
