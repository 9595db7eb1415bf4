"""Bytes into an `ImageInput`: decoded with Pillow, hashed, bounded in pixels."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings

from PIL import Image, UnidentifiedImageError

from oai_server.engine.types import ImageInput
from oai_server.media.errors import MediaError

# Pillow warns above ~89 Mpx and refuses above twice that; a bomb of a few KB that
# decodes into gigabytes is refused here first, at a size no vision encoder wants.
MAX_PIXELS = 64 * 1024 * 1024


def decode_image(data: bytes, param: str) -> ImageInput:
    """Decode `data` (any format Pillow reads) into RGB pixels; `MediaError` naming `param`
    if it is not an image. Blocking: call it off the event loop."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as opened:
                width, height = opened.size
                if width * height > MAX_PIXELS:
                    raise MediaError(
                        f"The image at {param} is {width}x{height} pixels, more than the "
                        f"server decodes ({MAX_PIXELS} pixels).",
                        param=param,
                    )
                pixels = opened.convert("RGB")
    except MediaError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Warning) as exc:
        raise MediaError(
            f"The image at {param} could not be decoded: {exc}.", param=param
        ) from None
    return ImageInput(digest=hashlib.sha256(data).hexdigest(), size=len(data), pixels=pixels)


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
