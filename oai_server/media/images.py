"""Bytes into an `ImageInput`: sized from the header, decoded with Pillow, downscaled to
what the model's processor takes, hashed.

A file's size says nothing of its pixels (an 8 KB PNG can declare 8192x8192), so an
image's declared size is read first, from its header, and bounded before any pixel is
decoded; the decode then shrinks it to the model's size before it is kept, so what a
request holds while it runs is what the model sees, not what the file declared.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image, UnidentifiedImageError

from oai_server.engine.types import ImageInput
from oai_server.media.errors import MediaError

# Pillow warns above ~89 Mpx and refuses above twice that; a bomb of a few KB that
# decodes into gigabytes is refused here first, at a size no vision encoder wants.
MAX_PIXELS = 64 * 1024 * 1024
# Modes a resize filters well and that become RGB without a bigger copy first (Pillow
# keeps "1" as a byte a pixel, as "L"; a resize of "1" or "P" could only pick pixels).
_RESIZABLE = ("L", "RGB")


def image_size(data: bytes, param: str) -> tuple[int, int]:
    """The width and height `data` declares, read from its header (nothing decoded);
    `MediaError` naming `param` if it is not an image or declares too many pixels."""
    with _opened(data, param) as opened:
        return opened.size


def decode_image(data: bytes, param: str, max_side: int | None = None) -> ImageInput:
    """Decode `data` (any format Pillow reads) into RGB pixels, its longest side shrunk to
    `max_side` if longer (a JPEG is decoded at the nearest smaller scale to begin with);
    `MediaError` naming `param` if it is not an image. Blocking: call it off the event loop."""
    with _opened(data, param) as opened:
        image = opened
        if max_side is not None:
            if opened.mode == "1":
                image = opened.convert("L")
            elif opened.mode not in _RESIZABLE:
                image = opened.convert("RGB")
            image.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
        pixels = image.convert("RGB")
    return ImageInput(digest=hashlib.sha256(data).hexdigest(), size=len(data), pixels=pixels)


@contextmanager
def _opened(data: bytes, param: str) -> Iterator[Image.Image]:
    """`data` opened (its header read), its declared size bounded; what Pillow raises
    opening or decoding it in the body becomes a `MediaError` naming `param`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as opened:
                width, height = opened.size
                if width * height > MAX_PIXELS:
                    raise _too_many_pixels(param, f"{width}x{height} pixels")
                yield opened
    except MediaError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # Pillow's own bound, met on opening, before the size can be read here.
        raise _too_many_pixels(param, "more pixels than Pillow opens") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Warning) as exc:
        raise MediaError(
            f"The image at {param} could not be decoded: {exc}.", param=param
        ) from None


def _too_many_pixels(param: str, declared: str) -> MediaError:
    return MediaError(
        f"The image at {param} declares {declared}, more than the server decodes "
        f"({MAX_PIXELS} pixels).",
        param=param,
    )


def data_url_bytes(url: str, param: str, max_bytes: int) -> bytes:
    """The bytes of a `data:` URL (`data:image/png;base64,...`)."""
    header, sep, payload = url.partition(",")
    if not sep:
        raise MediaError(f"The data: URL at {param} has no ',' before its data.", param=param)
    kind = header[len("data:") :].split(";", 1)[0].strip().lower()
    if kind and not kind.startswith("image/") and kind != "application/octet-stream":
        raise MediaError(f"The data: URL at {param} holds {kind}, not an image.", param=param)
    if not header.endswith(";base64"):
        raise MediaError(f"The data: URL at {param} must be base64-encoded.", param=param)
    # Three bytes per four characters: refuse before decoding what would be too big.
    if len(payload) * 3 // 4 > max_bytes + 3:
        raise MediaError(
            f"The image at {param} is larger than the server's limit of {max_bytes} bytes.",
            param=param,
        )
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"The data: URL at {param} is not valid base64.", param=param) from None
